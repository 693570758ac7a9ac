"""Walking JSON Schemas along data paths: the type side of the data-flow check.

The designer checks every path an expression reads (``body.customer.name``) against the
JSON Schema of the data it reads from (a node type's declared output schema, a webhook's
body schema). This module answers, for one schema and one field name, "what is the schema
of that field, or why can it not exist", and lists the fields of a schema for the field
picker.

Reading rules (documented in docs/expressions.md, "Typed data flow"):

- ``{}`` or a schema without ``type``/``properties``/``anyOf`` is *anything*: every path
  into it is accepted, and what it yields is anything again.
- An object schema that lists ``properties`` is **closed** unless it says
  ``additionalProperties`` (``true`` or a schema): an output schema describes what a step
  produces, so a name it does not list is a misspelling, not an extension. An object
  without ``properties`` is open.
- A field of a list is the field of each item (JSONata maps over arrays), so
  ``items.price`` reads ``price`` of the ``items`` schema; a field of a list of strings or
  of a string, number, boolean or null cannot exist.
- ``anyOf`` / ``oneOf`` and a ``type`` list are alternatives: a field exists when it exists
  in at least one alternative.
"""

from __future__ import annotations

from collections.abc import Mapping
from difflib import get_close_matches
from typing import Any, Final

import msgspec

__all__ = [
    "ANYTHING",
    "FieldInfo",
    "Missing",
    "child_schema",
    "describe_type",
    "is_list",
    "list_fields",
    "union",
    "value_schema",
]

ANYTHING: Final[dict[str, Any]] = {}
"""The schema that accepts every value (and every path into it)."""

_SCALARS: Final = ("string", "number", "integer", "boolean", "null")
_MAX_KNOWN: Final = 12


class Missing(msgspec.Struct, frozen=True):
    """Why a field cannot exist: ``code`` is ``unknown_field`` (an object that does not list
    it) or ``wrong_type`` (a scalar, or a list of scalars); ``message`` is the sentence for
    the diagnostic, e.g. ``customer has no field name; known: email``."""

    code: str
    message: str


class FieldInfo(msgspec.Struct, frozen=True):
    """One field a schema describes, for the field picker: its JSONata ``path`` (quoted
    where a name is not a plain identifier), a short ``type`` (``string``, ``list of
    object``, ``any``) and its ``description`` when the schema gives one."""

    path: str
    type: str
    description: str = ""


def _types(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list | tuple):
        return [t for t in declared if isinstance(t, str)]
    if isinstance(schema.get("properties"), dict):
        return ["object"]
    if isinstance(schema.get("items"), dict):
        return ["array"]
    return []


def _alternatives(schema: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list | tuple) and options:
            return [o for o in options if isinstance(o, dict)]
    return None


def describe_type(schema: Any) -> str:
    """A short name of what ``schema`` holds: ``string``, ``object``, ``list of number``,
    ``string or null``, ``any``."""
    if not isinstance(schema, dict):
        return "any"
    options = _alternatives(schema)
    if options is not None:
        alternatives = dict.fromkeys(describe_type(o) for o in options)
        return " or ".join(alternatives) if "any" not in alternatives else "any"
    types = _types(schema)
    if not types:
        return "any"
    names: list[str] = []
    for t in types:
        if t == "array":
            items = schema.get("items")
            names.append(
                "list"
                if not isinstance(items, dict) or not items
                else f"list of {describe_type(items)}"
            )
        else:
            names.append(t)
    return " or ".join(names)


def is_list(schema: Any) -> bool:
    """True when ``schema`` holds only lists (every alternative is an ``array``)."""
    if not isinstance(schema, dict):
        return False
    options = _alternatives(schema)
    if options is not None:
        return bool(options) and all(is_list(o) for o in options)
    types = _types(schema)
    return bool(types) and all(t == "array" for t in types)


def union(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """One schema accepting what any of ``schemas`` accepts (``{}`` when one is anything)."""
    unique: list[dict[str, Any]] = []
    seen: set[int] = set()
    for schema in schemas:
        if not schema:
            return ANYTHING
        parts = schema["anyOf"] if set(schema) == {"anyOf"} else [schema]
        for part in parts:
            if id(part) not in seen:  # schemas are shared, never copied: identity is enough
                seen.add(id(part))
                unique.append(part)
    if not unique:
        return ANYTHING
    return unique[0] if len(unique) == 1 else {"anyOf": unique}


def child_schema(schema: Any, name: str, owner: str) -> dict[str, Any] | Missing:
    """The schema of field ``name`` of a value described by ``schema``.

    ``owner`` names the value in messages (``customer``, ``$trigger``). Returns the field's
    schema (``{}`` when anything may be there) or a :class:`Missing` saying why the field
    cannot exist (see the module docstring for the rules).
    """
    if not isinstance(schema, dict) or not schema:
        return ANYTHING
    options = _alternatives(schema)
    if options is not None:
        found: list[dict[str, Any]] = []
        first: Missing | None = None
        for option in options:
            result = child_schema(option, name, owner)
            if isinstance(result, Missing):
                first = first or result
            else:
                found.append(result)
        if found or first is None:
            return union(found)
        return first
    types = _types(schema)
    if not types:
        return ANYTHING
    if "object" in types:
        found_in_object = _object_field(schema, name, owner)
        if not isinstance(found_in_object, Missing) or "array" not in types:
            return found_in_object
    if "array" in types:
        items = schema.get("items")
        if not isinstance(items, dict) or not items:
            return ANYTHING
        result = child_schema(items, name, owner)
        if isinstance(result, Missing) and result.code == "wrong_type":
            return Missing(
                "wrong_type",
                f"{owner} is a list of {describe_type(items)}; it has no field {name}",
            )
        return result
    return Missing(
        "wrong_type", f"{owner} is {_article(describe_type(schema))}; it has no field {name}"
    )


def _article(type_name: str) -> str:
    return ("an " if type_name[:1] in "aeiou" else "a ") + type_name


def _object_field(schema: Mapping[str, Any], name: str, owner: str) -> dict[str, Any] | Missing:
    properties = schema.get("properties")
    if isinstance(properties, dict) and name in properties:
        found = properties[name]
        return found if isinstance(found, dict) else ANYTHING
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    if extra is True or not isinstance(properties, dict):
        return ANYTHING
    known = sorted(str(k) for k in properties)
    listed = ", ".join(known[:_MAX_KNOWN]) + (", …" if len(known) > _MAX_KNOWN else "")
    message = f"{owner} has no field {name}; known: {listed or '(none)'}"
    close = get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        message += f" (did you mean {close[0]}?)"
    return Missing("unknown_field", message)


def value_schema(value: Any, depth: int = 0) -> dict[str, Any]:
    """The schema of a literal JSON ``value`` (types and object keys; lists by their first
    items), e.g. ``{"type": "object", "properties": {"a": {"type": "integer"}}, ...}``."""
    if depth > 32:
        return ANYTHING
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, dict):
        return {
            "type": "object",
            "properties": {str(k): value_schema(v, depth + 1) for k, v in value.items()},
            "required": [str(k) for k in value],
        }
    if isinstance(value, list | tuple):
        items = union([value_schema(v, depth + 1) for v in list(value)[:20]])
        return {"type": "array", "items": items} if items else {"type": "array"}
    return ANYTHING


def _path_part(name: str) -> str:
    plain = name.replace("_", "a").isalnum() and not name[:1].isdigit()
    return name if plain and name.isascii() else "`" + name.replace("`", "") + "`"


def list_fields(schema: Any, prefix: str = "", depth: int = 4, limit: int = 200) -> list[FieldInfo]:
    """Every field ``schema`` describes, depth first, as picker entries whose ``path``
    starts with ``prefix`` (``body`` + ``.qty``). Lists are walked into their items
    (``items.price``); at most ``depth`` levels and ``limit`` entries."""
    found: list[FieldInfo] = []
    _walk_fields(schema, prefix, depth, limit, found)
    return found


def _walk_fields(schema: Any, prefix: str, depth: int, limit: int, found: list[FieldInfo]) -> None:
    if depth <= 0 or not isinstance(schema, dict):
        return
    options = _alternatives(schema)
    if options is not None:
        for option in options:
            _walk_fields(option, prefix, depth, limit, found)
        return
    if "array" in _types(schema):
        _walk_fields(schema.get("items"), prefix, depth, limit, found)
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    seen = {f.path for f in found}
    for name, sub in properties.items():
        if len(found) >= limit:
            return
        path = f"{prefix}.{_path_part(str(name))}" if prefix else _path_part(str(name))
        if path not in seen:
            description = sub.get("description", "") if isinstance(sub, dict) else ""
            found.append(FieldInfo(path, describe_type(sub), str(description)[:200]))
        _walk_fields(sub, path, depth - 1, limit, found)
