"""The node config panel: an HTML form generated from a node type's config schema.

The designer canvas posts the selected node (type, id, label, config) to the server, which
answers with the fragment rendered here. The browser never gets to choose markup: every value
goes through the autoescaping template ``fragments/config_panel.html``.

Each control carries ``data-field`` (the config key; ``__label`` for the node label) and
``data-kind``, which tells ``static/js/panel.js`` how to read the value back:

============  =====================================  ==========================================
kind          control                                value read back
============  =====================================  ==========================================
``string``    ``input[type=text]`` or ``textarea``   the text (omitted when empty)
``number``    ``input[type=number]``                 a float (omitted when empty)
``integer``   ``input[type=number][step=1]``         an int (omitted when empty)
``boolean``   ``input[type=checkbox]``               true / false
``enum``      ``select``                             the option (JSON-decoded when
                                                     ``data-json`` is set; omitted when empty)
``kv``        rows of key/value inputs               an object (values per ``data-value-kind``)
``json``      ``textarea``                           parsed JSON (omitted when empty)
credential    ``select`` of saved credentials        the credential id (omitted when empty)
expression    ``input[type=text]`` or ``textarea``   the text, ``=``-prefixed (omitted when
                                                     empty)
============  =====================================  ==========================================

Controls of fields listed in ``spec.expression_fields`` carry ``data-expression``: a value
starting with ``=`` is kept as a string (a JSONata expression) whatever the kind.

Expression toggles: every expression field is drawn twice, as its literal widget and as an
expression input (kind ``expression``), with an ``fx`` button between them. Exactly one of
the two carries ``data-field`` (the other ``data-field-off`` and sits in a hidden wrapper);
``panel.js`` swaps them and carries the value over (literal ``x`` <-> expression ``=x``).
A field whose current value starts with ``=`` opens in expression mode.

Enum labels: a select shows each option's label from the field schema's
``"x-enum-labels"`` (an object, option value -> label; non-string values are keyed by their
JSON text, e.g. ``"1"``, ``"true"``; options follow the labels' order) or, in plain JSON
Schema, from ``oneOf`` / ``anyOf`` branches of ``{"const": value, "title": label}`` (those
also stand in for ``enum``). The option value stays the raw id; an option without a label
shows the id.

Credential pickers: a field whose schema has ``"x-credential-type"`` (a type name or a
list) is a select of the saved credentials of those types (:class:`CredentialChoice`:
name and a masked hint, never a secret) plus a "New ..." link per type to
``/credentials?type=<type>&next=<designer URL>?node=<id>&field=<name>``, which returns to
the designer with the new credential filled in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagnostics import Diagnostic
from frontend import display

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
PANEL_TEMPLATE = "fragments/config_panel.html"

#: Config keys every node accepts, edited in the panel's "Settings" section.
RESERVED_FIELDS = ("on_error", "timeout")
ON_ERROR_CHOICES = (
    ("fail", "Fail the run"),
    ("error_port", "Continue on the error port"),
)


CREDENTIAL_SCHEMA_KEY = "x-credential-type"
ENUM_LABELS_KEY = "x-enum-labels"


@dataclass(frozen=True)
class CredentialChoice:
    """A saved credential as the picker shows it: id, name, type and a masked ``hint``
    (``"••••1234"``, ``"connected"``); never secret material."""

    id: str
    name: str
    type: str
    hint: str = ""


@dataclass
class FieldView:
    """Everything the template needs to draw one config field."""

    name: str
    kind: str  # string | number | integer | boolean | enum | kv | json
    title: str
    description: str = ""
    required: bool = False
    expression: bool = False
    multiline: bool = False
    value: Any = None  # the text shown in the control (str), or bool for checkboxes
    placeholder: str = ""
    minimum: Any = None
    maximum: Any = None
    options: list[tuple[str, str]] = field(default_factory=list)  # (value, text)
    enum_json: bool = False  # option values are JSON-encoded (non-string enums)
    rows: list[tuple[str, str]] = field(default_factory=list)  # kv rows (key, value text)
    value_kind: str = "auto"  # how kv values are read back
    errors: list[str] = field(default_factory=list)
    expr_active: bool = False  # the field holds an expression: its expression input is live
    expr_value: str = ""  # text of the expression input ("=..." or "")
    credential_types: list[str] = field(default_factory=list)
    new_links: list[tuple[str, str]] = field(default_factory=list)  # (href, text)

    @property
    def is_expression_value(self) -> bool:
        return isinstance(self.value, str) and self.value.startswith("=")


def create_environment(extra_search_paths: list[Path] | None = None) -> SandboxedEnvironment:
    """A sandboxed, autoescaping environment over ``frontend/templates``.

    The page controllers may build their own environment; it must autoescape HTML.
    """
    paths = [TEMPLATES_DIR, *(extra_search_paths or [])]
    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader([str(p) for p in paths]),
        autoescape=jinja2.select_autoescape(["html", "xml"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    display.install(env)
    return env


def render_config_panel(
    env: jinja2.Environment,
    spec: NodeTypeSpec,
    node_id: str,
    label: str,
    config: dict[str, Any],
    diagnostics: list[Diagnostic],
    *,
    credentials: Sequence[CredentialChoice] = (),
    credential_type_labels: Mapping[str, str] | None = None,
    return_to: str = "",
) -> str:
    """Render the side-panel form editing one node of type ``spec``.

    ``credentials`` are the saved credentials the pickers may offer (each picker keeps
    those of its field's types); ``credential_type_labels`` maps a credential type name to
    its label for the "New ..." links; ``return_to`` is the designer's path (same-site,
    starting with ``/``) the credentials page sends the user back to.
    """
    schema = spec.config_schema or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    expression_fields = set(spec.expression_fields)

    fields = []
    for name, raw in properties.items():
        if name in RESERVED_FIELDS:
            continue
        prop = raw if isinstance(raw, dict) else {}
        if CREDENTIAL_SCHEMA_KEY in prop:
            view = _credential_view(
                name, prop, config.get(name), required=name in required, credentials=credentials
            )
            view.new_links = _new_credential_links(
                view.credential_types, credential_type_labels or {}, return_to, node_id, name
            )
        else:
            view = _field_view(
                name,
                prop,
                config.get(name),
                required=name in required,
                expression=name in expression_fields,
            )
        fields.append(view)
    by_name = {f.name: f for f in fields}

    node_errors: list[Diagnostic] = []
    for diag in diagnostics:
        if diag.node_id != node_id:
            continue
        target = by_name.get(_top_field(diag.field)) if diag.field else None
        if target is not None:
            target.errors.append(diag.message)
        else:
            node_errors.append(diag)

    timeout = config.get("timeout")
    return env.get_template(PANEL_TEMPLATE).render(
        spec=spec,
        node_id=node_id,
        label=label,
        fields=fields,
        node_errors=node_errors,
        on_error=config.get("on_error") or "fail",
        on_error_choices=ON_ERROR_CHOICES,
        timeout="" if timeout is None else str(timeout),
    )


def _top_field(path: str) -> str:
    """``mapping.total`` -> ``mapping``; ``items[0].name`` -> ``items``."""
    return path.split(".", 1)[0].split("[", 1)[0]


def _humanize(name: str) -> str:
    return name.replace("_", " ").strip().capitalize() or name


def _base_view(name: str, prop: dict[str, Any], kind: str, *, required: bool) -> FieldView:
    return FieldView(
        name=name,
        kind=kind,
        title=str(prop.get("title") or _humanize(name)),
        description=str(prop.get("description") or ""),
        required=required,
    )


def _credential_view(
    name: str,
    prop: dict[str, Any],
    value: Any,
    *,
    required: bool,
    credentials: Sequence[CredentialChoice],
) -> FieldView:
    accepted = prop[CREDENTIAL_SCHEMA_KEY]
    types = [accepted] if isinstance(accepted, str) else [str(t) for t in accepted or ()]
    view = _base_view(name, prop, "credential", required=required)
    view.credential_types = types
    current = value if isinstance(value, str) else ""
    view.value = current
    for choice in credentials:
        if choice.type in types:
            text = f"{choice.name} · {choice.hint}" if choice.hint else choice.name
            view.options.append((choice.id, text))
    if current and all(option != current for option, _ in view.options):
        # Deleted, or of another type: keep the reference visible instead of dropping it.
        view.options.insert(0, (current, f"Missing credential ({current})"))
    return view


def _new_credential_links(
    types: list[str], labels: Mapping[str, str], return_to: str, node_id: str, field_name: str
) -> list[tuple[str, str]]:
    """``(href, text)`` of a "New <type label>" link per credential type."""
    links = []
    for type_name in types:
        query = {"type": type_name}
        if return_to.startswith("/") and not return_to.startswith("//"):
            query["next"] = f"{return_to}?{urlencode({'node': node_id, 'field': field_name})}"
        label = labels.get(type_name, type_name)
        links.append((f"/credentials?{urlencode(query, quote_via=quote)}", f"New {label}"))
    return links


def _field_view(
    name: str, prop: dict[str, Any], value: Any, *, required: bool, expression: bool
) -> FieldView:
    if expression and isinstance(value, str) and value.startswith("="):
        # Expression mode: the expression input holds the value, the literal widget waits
        # (empty) behind the fx toggle.
        view = _field_view(name, prop, None, required=required, expression=True)
        view.expr_active = True
        view.expr_value = value
        return view
    view = _base_view(name, prop, "json", required=required)
    view.expression = expression
    default = prop.get("default")
    type_ = prop.get("type")

    choices = enum_choices(prop)
    if choices is not None:
        _enum_view(view, choices, value if value is not None else default)
        return view

    if type_ == "string":
        view.kind = "string"
        view.multiline = prop.get("format") == "textarea" or bool(prop.get("x-multiline"))
        view.value = "" if value is None else _as_text(value)
        view.placeholder = "" if default is None else _as_text(default)
    elif type_ in ("number", "integer"):
        view.kind = type_
        view.value = "" if value is None else _as_text(value)
        view.placeholder = "" if default is None else _as_text(default)
        view.minimum = prop.get("minimum")
        view.maximum = prop.get("maximum")
    elif type_ == "boolean":
        view.kind = "boolean"
        view.value = bool(default if value is None else value)
    elif type_ == "object" and prop.get("additionalProperties") and not prop.get("properties"):
        view.kind = "kv"
        extra = prop["additionalProperties"]
        view.value_kind = _kv_value_kind(extra if isinstance(extra, dict) else {})
        source = value if isinstance(value, dict) else (default or {})
        view.rows = [(str(k), _kv_text(v)) for k, v in source.items()]
    else:
        view.kind = "json"
        view.multiline = True
        if value is None:
            view.value = ""
        else:
            view.value = json.dumps(value, indent=2, ensure_ascii=False)
        view.placeholder = "" if default is None else json.dumps(default)
    return view


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


def _enum_view(view: FieldView, choices: list[tuple[Any, str]], current: Any) -> None:
    view.kind = "enum"
    view.enum_json = not all(isinstance(c, str) for c, _ in choices)
    encode = json.dumps if view.enum_json else str
    view.options = [(encode(c), label) for c, label in choices]
    view.value = "" if current is None else encode(current)


def _kv_value_kind(schema: dict[str, Any]) -> str:
    type_ = schema.get("type")
    return type_ if type_ in ("string", "number", "integer", "boolean") else "auto"


def _kv_text(value: Any) -> str:
    """Show strings as they are, anything else as JSON (read back with ``auto``)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)
