"""OpenAPI Schema Objects -> self-contained JSON Schema for config panels and output schemas.

References are inlined (the designer's config panel and typed mappings read plain JSON
Schema), so each schema is cut where it would grow without end:

- a schema that refers to itself (Stripe's ``customer`` -> ``subscription`` ->
  ``customer``) stops at the second visit of a component: ``{"description": "<name>
  (recursive)"}``, i.e. any value;
- beyond :data:`MAX_DEPTH` (6) nested levels, and once :data:`MAX_NODES` (1,500) schema
  nodes have been written for one operation (its fields and its output together), the
  rest is ``{}`` (any value) as well; descriptions below the top level are cut to
  :data:`NESTED_DESCRIPTION` (200) characters.

Time and memory per operation are bounded by those numbers whatever the document holds
(Stripe's 417 operations: about 12 MB of definition).

OpenAPI 3.0 keywords are translated to JSON Schema: ``nullable: true`` adds ``"null"``
to ``type``; ``discriminator``, ``xml``, ``example``, ``externalDocs`` and extensions are
dropped; ``readOnly`` properties leave request schemas and ``writeOnly`` ones leave
response schemas (OpenAPI 3.0.3, "Fixed Fields" of the Schema Object).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .loading import DocumentRefused, pointer_target

MAX_DEPTH = 4
MAX_NODES = 800
NESTED_DESCRIPTION = 200

KEPT = (
    "type",
    "format",
    "title",
    "description",
    "enum",
    "const",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
    "minProperties",
    "maxProperties",
    "contentMediaType",
    "contentEncoding",
)

Direction = Literal["request", "response"]


def resolve(doc: dict[str, Any], value: Any) -> Any:
    """``value`` with its ``$ref`` chain followed (the loader checked every chain ends)."""
    for _ in range(64):
        if isinstance(value, dict) and isinstance(value.get("$ref"), str):
            target = pointer_target(doc, value["$ref"])
            if target is None:
                raise DocumentRefused(f"$ref {value['$ref']!r} does not resolve")
            value = target
        else:
            return value
    raise DocumentRefused("a $ref chain does not end")


@dataclass
class SchemaConverter:
    """Converts schemas of one document; ``direction`` decides readOnly/writeOnly."""

    doc: dict[str, Any]
    direction: Direction = "request"
    nodes: int = 0
    cut: list[str] = field(default_factory=list)

    def convert(self, schema: Any) -> dict[str, Any]:
        """``schema`` as self-contained JSON Schema, spending this converter's node budget
        (one converter per operation)."""
        return self._convert(schema, 0, ())

    def _convert(self, schema: Any, depth: int, seen: tuple[str, ...]) -> dict[str, Any]:
        self.nodes += 1
        if not isinstance(schema, dict) or self.nodes > MAX_NODES or depth > MAX_DEPTH:
            return {}
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if ref in seen:
                self.cut.append(name)
                return {"description": f"{name} (recursive)"}
            target = resolve(self.doc, schema)
            inlined = self._convert(target, depth, (*seen, ref))
            if "title" not in inlined and ref.startswith("#/components/schemas/"):
                inlined = {"title": name, **inlined}
            return inlined
        out: dict[str, Any] = {k: schema[k] for k in KEPT if k in schema}
        if depth and isinstance(out.get("description"), str):
            if len(out["description"]) > NESTED_DESCRIPTION:
                out["description"] = out["description"][:NESTED_DESCRIPTION] + "…"
        if schema.get("nullable") is True and "type" in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            out["type"] = [*types, "null"] if "null" not in types else types
        if "null" not in (out.get("type") or []) and schema.get("nullable") is True:
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        for key in ("oneOf", "anyOf"):
            options = schema.get(key)
            if isinstance(options, list):
                out[key] = [self._convert(o, depth + 1, seen) for o in options]
        all_of = schema.get("allOf")
        if isinstance(all_of, list):
            merged = self._merge_all_of(all_of, depth, seen)
            for k, v in merged.items():
                out.setdefault(k, v)
        props = schema.get("properties")
        if isinstance(props, dict):
            converted: dict[str, Any] = {}
            for name, prop in props.items():
                target = resolve(self.doc, prop)
                if self._hidden(target):
                    continue
                converted[name] = self._convert(prop, depth + 1, seen)
            out["properties"] = converted
            required = [r for r in schema.get("required") or () if r in converted]
            if required:
                out["required"] = required
        items = schema.get("items")
        if isinstance(items, dict):
            out["items"] = self._convert(items, depth + 1, seen)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            out["additionalProperties"] = self._convert(extra, depth + 1, seen)
        elif isinstance(extra, bool):
            out["additionalProperties"] = extra
        if "type" not in out and ("properties" in out or "additionalProperties" in out):
            out["type"] = "object"
        return out

    def _merge_all_of(self, parts: list[Any], depth: int, seen: tuple[str, ...]) -> dict[str, Any]:
        """``allOf`` of objects merged into one object (properties and required united);
        a part that is not an object keeps the whole as ``allOf``."""
        converted = [self._convert(p, depth + 1, seen) for p in parts]
        if not all(c.get("type") in (None, "object") and "oneOf" not in c for c in converted):
            return {"allOf": converted}
        merged: dict[str, Any] = {"type": "object", "properties": {}}
        required: list[str] = []
        for part in converted:
            merged["properties"].update(part.get("properties") or {})
            required += [r for r in part.get("required") or () if r not in required]
            for k in ("description", "title"):
                if k in part:
                    merged.setdefault(k, part[k])
        if required:
            merged["required"] = required
        return merged

    def _hidden(self, schema: Any) -> bool:
        if not isinstance(schema, dict):
            return False
        if self.direction == "request":
            return schema.get("readOnly") is True
        return schema.get("writeOnly") is True


def flat_type(schema: dict[str, Any]) -> str:
    """The one JSON type a field of ``schema`` takes (``"string"``, ``"object"``, ...;
    ``""`` when it is a union or unknown)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        return kinds[0] if len(kinds) == 1 else ""
    return kind if isinstance(kind, str) else ""
