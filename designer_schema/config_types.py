"""Literal config values against a node type's config schema: JSON types and enums.

A deliberately small subset of JSON Schema (``type``, possibly a list of types, and
``enum``); the full rules are in :mod:`designer_schema.compiler`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from designer_schema.diagnostic_sink import DiagnosticSink

JSON_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
"""The JSON Schema type names a config schema's ``type`` may use."""


def schema_properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``properties`` of a JSON Schema object (empty when absent or malformed)."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def schema_required(schema: Mapping[str, Any]) -> list[str]:
    """The names listed in a JSON Schema's ``required`` (strings only)."""
    required = schema.get("required") if isinstance(schema, Mapping) else None
    if not isinstance(required, list | tuple):
        return []
    return [name for name in required if isinstance(name, str)]


def json_type_of(value: Any) -> str:
    """The JSON Schema type name of a Python value (``integer`` for ints, ``null`` for None)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def matches_type(value: Any, expected: str) -> bool:
    """True when ``value`` is of JSON Schema type ``expected`` (an integral float is an integer)."""
    actual = json_type_of(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer":
        return actual == "integer" or (
            actual == "number" and math.isfinite(value) and float(value).is_integer()
        )
    return actual == expected


def check_literal(
    value: Any, schema: Mapping[str, Any], node_id: str, field: str, sink: DiagnosticSink
) -> None:
    """Report ``invalid_config`` on ``sink`` when a literal does not have the schema's
    ``type`` or is not in its ``enum``."""
    declared = schema.get("type")
    expected: list[str]
    if isinstance(declared, str):
        expected = [declared]
    elif isinstance(declared, list | tuple):
        expected = [t for t in declared if isinstance(t, str)]
    else:
        expected = []
    expected = [t for t in expected if t in JSON_TYPES]
    if expected and not any(matches_type(value, t) for t in expected):
        sink.add(
            "invalid_config",
            f"expected {' or '.join(expected)}, got {json_type_of(value)}",
            node_id=node_id,
            field=field,
        )
        return
    enum = schema.get("enum")
    if isinstance(enum, list | tuple) and not any(json_equal(value, e) for e in enum):
        choices = ", ".join(short(e) for e in enum)
        sink.add(
            "invalid_config",
            f"{short(value)} is not one of {choices}",
            node_id=node_id,
            field=field,
        )


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it (``True`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    try:
        return bool(a == b)
    except Exception:  # exotic values with a raising __eq__
        return False


def short(value: Any) -> str:
    """``repr(value)`` cut to 40 characters, for messages."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
