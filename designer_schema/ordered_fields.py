"""Ordered field lists: config fields whose entries keep the order a person gave them.

PostgreSQL's ``jsonb`` (where drafts, versions and graphs live) stores an object's keys
sorted by length and then bytewise, so an object cannot carry an order. A field whose
schema has ``"x-ordered-fields": true`` (the Set's *Fields*) is therefore stored as a list
of entries ``[{"name": "total", "value": "=qty * price"}, ...]``; the object form
``{"total": "=qty * price"}`` of older drafts, versions and API clients is read too (in
the order it has), so nothing stored before needs rewriting. The designer writes the list
form when the field is next edited.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

ORDERED_FIELDS: Final = "x-ordered-fields"
"""Config-schema flag: the field is an ordered list of ``{"name", "value"}`` entries (or an
object, read in its own order)."""


def ordered_fields_schema(title: str, description: str) -> dict[str, Any]:
    """The JSON Schema of an ordered field list: the list form, or the older object form."""
    return {
        "type": ["array", "object"],
        "title": title,
        "description": description,
        ORDERED_FIELDS: True,
        "items": {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}, "value": {}},
            "required": ["name", "value"],
            "additionalProperties": False,
        },
        "additionalProperties": True,
    }


def field_entries(value: Any) -> list[tuple[str, Any, str]] | None:
    """``[(name, value, path), ...]`` of an ordered field list in its order, ``path`` being
    the entry value's place under the field (``0.value`` in the list form, the name in
    the object form: what expression paths and diagnostics use); ``None`` when ``value``
    is neither form. List entries that are not ``{"name": str, ...}`` objects are skipped
    (:func:`entry_problems` names them)."""
    if isinstance(value, Mapping):
        return [(str(k), v, str(k)) for k, v in value.items()]
    if isinstance(value, list):
        return [
            (entry["name"], entry.get("value"), f"{i}.value")
            for i, entry in enumerate(value)
            if isinstance(entry, Mapping) and isinstance(entry.get("name"), str)
        ]
    return None


def entry_problems(value: Any) -> list[tuple[str, str]]:
    """``[(path, message), ...]``: list entries without a name, and names used twice."""
    if not isinstance(value, list):
        return []
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, entry in enumerate(value):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            problems.append((f"{i}", "each entry needs a name"))
        elif name in seen:
            problems.append((f"{i}.name", f"the name {name!r} is used twice"))
        else:
            seen.add(name)
    return problems


def as_field_map(value: Any) -> dict[str, Any] | None:
    """``{name: value}`` of an ordered field list in the list form (every entry exactly
    ``{"name": str, "value": ...}``, names distinct; ``[]`` included), else ``None``.
    The diff (:mod:`designer_schema.diff`) compares such lists field by field."""
    if not isinstance(value, list):
        return None
    out: dict[str, Any] = {}
    for entry in value:
        if not (
            isinstance(entry, Mapping)
            and set(entry) == {"name", "value"}
            and isinstance(entry["name"], str)
            and entry["name"] not in out
        ):
            return None
        out[entry["name"]] = entry["value"]
    return out
