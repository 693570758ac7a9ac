"""Field views: what the config panel draws for one config field, chosen by its JSON schema.

:func:`field_view` looks at a field's schema and hands it to one builder per schema type
(:data:`BUILDERS`, tried in order; the first whose test matches builds the view). A new
field editor is one more ``(test, builder)`` pair plus a branch of the ``widget`` macro in
``templates/fragments/config_panel.html`` and a reader in ``static/js/fields.js``.

Kinds (``FieldView.kind``, the control's ``data-kind``) and the schema that selects them:

============  ==========================================================================
kind          schema
============  ==========================================================================
``enum``      ``enum`` (labels from ``x-enum-labels``) or ``oneOf``/``anyOf`` of consts
``workflow``  ``"x-workflow-picker": true`` (a searchable list of runnable workflows)
``duration``  ``type`` number/integer with ``"x-duration": true`` (seconds; typed as
              ``30s``, ``5m``, ``1h 30m``)
``string``    ``type`` string (``format: textarea`` or ``x-multiline``: a text area;
              ``x-code``: a code editor, highlighted in that language)
``number``    ``type`` number; ``integer``: ``type`` integer
``boolean``   ``type`` boolean
``chips``     ``type`` array whose ``items`` are strings, numbers or integers (an
              ``items.format`` of ``email`` checks each entry as an address)
``kv``        ``type`` object with ``additionalProperties`` and no ``properties``; also an
              ordered field list (``"x-ordered-fields": true``), read back as a list of
              ``{"name", "value"}`` entries in row order (``data-ordered``)
``json``      anything else (a JSON text area)
============  ==========================================================================
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from designer_schema.ordered_fields import ORDERED_FIELDS, field_entries

ENUM_LABELS_KEY = "x-enum-labels"
DURATION_KEY = "x-duration"
WORKFLOW_PICKER_KEY = "x-workflow-picker"
SUGGESTIONS_KEY = "x-suggestions"

_DURATION_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


@dataclass
class FieldView:
    """Everything the template needs to draw one config field.

    ``path`` is the field's place in the config (``retry.max_attempts`` for a sub-field
    of a group); ``subfields`` are the parts of a ``group`` (the retry policy)."""

    name: str
    kind: str
    title: str
    description: str = ""
    required: bool = False
    expression: bool = False
    multiline: bool = False
    code: str = ""  # a code editor's language ("x-code": "javascript"), highlighted
    value: Any = None  # the text shown in the control (str), or bool for checkboxes
    placeholder: str = ""
    minimum: Any = None
    maximum: Any = None
    options: list[tuple[str, str]] = field(default_factory=list)  # (value, text)
    enum_json: bool = False  # option values are JSON-encoded (non-string enums)
    rows: list[tuple[str, str]] = field(default_factory=list)  # kv rows (key, value text)
    value_kind: str = "auto"  # how kv values / chip items are read back
    ordered: bool = False  # kv: read back as an ordered list of {"name", "value"} entries
    chips: list[str] = field(default_factory=list)  # chip texts (strings; numbers as text)
    item_format: str = ""  # chips: "email" checks every entry
    suggestions: list[str] = field(default_factory=list)  # offered in a datalist
    errors: list[str] = field(default_factory=list)
    expr_active: bool = False  # the field holds an expression: its expression input is live
    expr_value: str = ""  # text of the expression input ("=..." or "")
    credential_types: list[str] = field(default_factory=list)
    new_links: list[tuple[str, str]] = field(default_factory=list)  # (href, text)
    workflow_name: str = ""  # picker: the chosen workflow's name ("" when none or unknown)
    path: str = ""
    subfields: list[FieldView] = field(default_factory=list)

    @property
    def is_expression_value(self) -> bool:
        return isinstance(self.value, str) and self.value.startswith("=")


def humanize(name: str) -> str:
    """``max_attempts`` -> ``Max attempts`` (a title for a field without one)."""
    return name.replace("_", " ").strip().capitalize() or name


def base_view(name: str, prop: Mapping[str, Any], kind: str, *, required: bool) -> FieldView:
    """A view with the common parts (title, description) filled in."""
    return FieldView(
        name=name,
        kind=kind,
        title=str(prop.get("title") or humanize(name)),
        description=str(prop.get("description") or ""),
        required=required,
        path=name,
    )


def format_duration(seconds: Any) -> str:
    """Seconds as the duration text the panel shows: ``90`` -> ``"1m 30s"``, ``0.5`` ->
    ``"0.5s"``, ``7200`` -> ``"2h"``; a non-number (an expression) as it is."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return "" if seconds is None else str(seconds)
    if not math.isfinite(seconds) or seconds < 0:
        return str(seconds)
    if seconds < 1 or not float(seconds).is_integer():
        return f"{seconds:g}s"
    rest = int(seconds)
    parts = []
    for unit, size in _DURATION_UNITS:
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return " ".join(parts) or "0s"


def field_view(
    name: str, prop: Mapping[str, Any], value: Any, *, required: bool, expression: bool
) -> FieldView:
    """The view of one config field (see the module docstring for the kinds)."""
    if expression and isinstance(value, str) and value.startswith("="):
        # Expression mode: the expression input holds the value, the literal widget waits
        # (empty) behind the fx toggle.
        view = field_view(name, prop, None, required=required, expression=True)
        view.expr_active = True
        view.expr_value = value
        return view
    view = base_view(name, prop, "json", required=required)
    view.expression = expression
    for test, build in BUILDERS:
        if test(prop):
            build(view, prop, value)
            break
    return view


# ---------------------------------------------------------------------------------------
# one builder per schema type


def _is_enum(prop: Mapping[str, Any]) -> bool:
    return enum_choices(prop) is not None


def _build_enum(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    choices = enum_choices(prop) or []
    current = value if value is not None else prop.get("default")
    view.kind = "enum"
    view.enum_json = not all(isinstance(c, str) for c, _ in choices)
    encode: Callable[[Any], str] = json.dumps if view.enum_json else str
    view.options = [(encode(c), label) for c, label in choices]
    view.value = "" if current is None else encode(current)


def _is_workflow(prop: Mapping[str, Any]) -> bool:
    return bool(prop.get(WORKFLOW_PICKER_KEY))


def _build_workflow(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    view.kind = "workflow"
    view.value = value if isinstance(value, str) else ""


def _types(prop: Mapping[str, Any]) -> list[str]:
    declared = prop.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str) and t != "null"]
    return []


def _is_duration(prop: Mapping[str, Any]) -> bool:
    return bool(prop.get(DURATION_KEY)) and any(t in ("number", "integer") for t in _types(prop))


def _build_duration(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    view.kind = "duration"
    view.value = format_duration(value)
    default = prop.get("default")
    view.placeholder = format_duration(default) if default is not None else "e.g. 30s, 5m, 1h"
    view.minimum = prop.get("minimum")


def _is_string(prop: Mapping[str, Any]) -> bool:
    return _types(prop)[:1] == ["string"]


def _build_string(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    default = prop.get("default")
    view.kind = "string"
    view.multiline = prop.get("format") == "textarea" or bool(prop.get("x-multiline"))
    view.code = str(prop.get("x-code") or "")
    view.value = "" if value is None else as_text(value)
    view.placeholder = "" if default is None else as_text(default)


def _is_number(prop: Mapping[str, Any]) -> bool:
    return _types(prop)[:1] in (["number"], ["integer"])


def _build_number(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    default = prop.get("default")
    view.kind = _types(prop)[0]
    view.value = "" if value is None else as_text(value)
    view.placeholder = "" if default is None else as_text(default)
    view.minimum = prop.get("minimum")
    view.maximum = prop.get("maximum")


def _is_boolean(prop: Mapping[str, Any]) -> bool:
    return _types(prop)[:1] == ["boolean"]


def _build_boolean(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    view.kind = "boolean"
    view.value = bool(prop.get("default") if value is None else value)


def _item_schema(prop: Mapping[str, Any]) -> Mapping[str, Any]:
    items = prop.get("items")
    return items if isinstance(items, Mapping) else {}


def _is_chips(prop: Mapping[str, Any]) -> bool:
    return _types(prop)[:1] == ["array"] and _types(_item_schema(prop))[:1] in (
        ["string"],
        ["number"],
        ["integer"],
    )


def _build_chips(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    items = _item_schema(prop)
    view.kind = "chips"
    view.value_kind = _types(items)[0]
    view.item_format = "email" if items.get("format") == "email" else ""
    source = value if isinstance(value, list) else []
    view.chips = [as_text(v) for v in source]
    if value is not None and not isinstance(value, list):
        # e.g. a plain address stored by an API client: show it as one entry
        view.chips = [as_text(value)]
    suggestions = prop.get(SUGGESTIONS_KEY)
    view.suggestions = [str(s) for s in suggestions] if isinstance(suggestions, list) else []
    view.placeholder = {
        "email": "name@example.com, then Enter",
    }.get(view.item_format, "Type a value, then Enter")


def _is_kv(prop: Mapping[str, Any]) -> bool:
    return (
        _types(prop)[:1] == ["object"]
        and bool(prop.get("additionalProperties"))
        and not prop.get("properties")
    )


def _build_kv(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    extra = prop["additionalProperties"]
    view.kind = "kv"
    view.value_kind = _kv_value_kind(extra if isinstance(extra, Mapping) else {})
    source = value if isinstance(value, dict) else (prop.get("default") or {})
    view.rows = [(str(k), kv_text(v)) for k, v in source.items()]


def _is_ordered(prop: Mapping[str, Any]) -> bool:
    return bool(prop.get(ORDERED_FIELDS))


def _build_ordered(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    view.kind = "kv"
    view.ordered = True
    entries = field_entries(value if value is not None else prop.get("default")) or []
    view.rows = [(name, kv_text(v)) for name, v, _path in entries]


def _build_json(view: FieldView, prop: Mapping[str, Any], value: Any) -> None:
    default = prop.get("default")
    view.kind = "json"
    view.multiline = True
    view.value = "" if value is None else json.dumps(value, indent=2, ensure_ascii=False)
    view.placeholder = "" if default is None else json.dumps(default)


BUILDERS: list[
    tuple[Callable[[Mapping[str, Any]], bool], Callable[[FieldView, Mapping[str, Any], Any], None]]
] = [
    (_is_enum, _build_enum),
    (_is_workflow, _build_workflow),
    (_is_ordered, _build_ordered),
    (_is_duration, _build_duration),
    (_is_string, _build_string),
    (_is_number, _build_number),
    (_is_boolean, _build_boolean),
    (_is_chips, _build_chips),
    (_is_kv, _build_kv),
    (lambda prop: True, _build_json),
]
"""``(test, builder)`` per field kind, tried in order; the last one takes anything."""


def enum_choices(prop: Mapping[str, Any]) -> list[tuple[Any, str]] | None:
    """``[(value, label), ...]`` of an enum field schema, ``None`` when it is no enum.

    Values come from ``"enum"`` (labels from ``"x-enum-labels"``) or, without ``"enum"``,
    from ``oneOf``/``anyOf`` branches that are all ``{"const": ..., "title": ...}``. A value
    without a label is labelled with its own text (strings as they are, others as JSON).
    """
    enum = prop.get("enum")
    if isinstance(enum, list):
        labels = prop.get(ENUM_LABELS_KEY)
        labels = labels if isinstance(labels, Mapping) else {}
        # The labels' order is the display order (schema generators may sort ``enum``).
        order = {key: i for i, key in enumerate(labels)}
        ordered = sorted(enum, key=lambda v: order.get(_enum_key(v), len(order)))
        return [(v, str(labels.get(_enum_key(v)) or _enum_key(v))) for v in ordered]
    for key in ("oneOf", "anyOf"):
        branches = prop.get(key)
        if (
            isinstance(branches, list)
            and branches
            and all(isinstance(b, Mapping) and "const" in b for b in branches)
        ):
            return [(b["const"], str(b.get("title") or _enum_key(b["const"]))) for b in branches]
    return None


def _enum_key(value: Any) -> str:
    """The text an enum value is labelled under: a string itself, anything else its JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _kv_value_kind(schema: Mapping[str, Any]) -> str:
    type_ = schema.get("type")
    return type_ if type_ in ("string", "number", "integer", "boolean") else "auto"


def kv_text(value: Any) -> str:
    """Show strings as they are, anything else as JSON (read back with ``auto``)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def as_text(value: Any) -> str:
    """A config value as the text of a control (strings as they are, others as JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)
