"""JSON Schema of an action's Config Struct, in the form the designer can render.

msgspec generates the schema (titles, descriptions and extra keywords come from
``Annotated[T, msgspec.Meta(title=..., description=..., extra_json_schema=...)]``;
``Literal`` types become ``enum``; fields without defaults are ``required``). The
designer's form renderer cannot follow ``$ref``, so every reference is inlined and
``$defs`` dropped. A recursive type cannot be inlined: the recursive occurrence becomes
``{"type": "object"}``.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec

__all__ = ["config_json_schema", "inline_refs", "output_json_schema"]


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with every local ``#/$defs/...`` reference replaced by its target."""
    defs: dict[str, Any] = schema.get("$defs", {})

    def walk(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/") :]
            if name in stack or name not in defs:
                target: dict[str, Any] = {"type": "object"}
            else:
                target = walk(copy.deepcopy(defs[name]), (*stack, name))
            siblings = {k: walk(v, stack) for k, v in node.items() if k not in ("$ref", "$defs")}
            return {**target, **siblings}
        return {k: walk(v, stack) for k, v in node.items() if k != "$defs"}

    result = walk(schema, ())
    assert isinstance(result, dict)
    return result


def _add_enum_types(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _add_enum_types(item)
        return
    if not isinstance(node, dict):
        return
    enum = node.get("enum")
    if isinstance(enum, list) and enum and "type" not in node:
        if all(isinstance(v, str) for v in enum):
            node["type"] = "string"
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in enum):
            node["type"] = "integer"
    for value in node.values():
        _add_enum_types(value)


def config_json_schema(config_type: type[Any]) -> dict[str, Any]:
    """JSON Schema (``{"type": "object", "properties": ..., "required": [...]}``) of
    ``config_type`` with all references inlined; ``enum`` nodes also get a ``type``."""
    schema = inline_refs(msgspec.json.schema(config_type))
    _add_enum_types(schema)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    return schema


def output_json_schema(output_type: Any) -> dict[str, Any]:
    """JSON Schema of an action's output (the return annotation of its function), with
    references inlined; ``{}`` (anything) for ``Any``, a missing annotation, or a type
    msgspec cannot describe."""
    if output_type is Any or output_type is None:
        return {}
    try:
        schema = inline_refs(msgspec.json.schema(output_type))
    except (TypeError, ValueError):
        return {}
    _add_enum_types(schema)
    return schema
