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
============  =====================================  ==========================================

Controls of fields listed in ``spec.expression_fields`` carry ``data-expression``: a value
starting with ``=`` is kept as a string (a JSONata expression) whatever the kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagnostics import Diagnostic

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
PANEL_TEMPLATE = "fragments/config_panel.html"

#: Config keys every node accepts, edited in the panel's "Settings" section.
RESERVED_FIELDS = ("on_error", "timeout")
ON_ERROR_CHOICES = (
    ("fail", "Fail the run"),
    ("error_port", "Continue on the error port"),
)


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

    @property
    def is_expression_value(self) -> bool:
        return isinstance(self.value, str) and self.value.startswith("=")


def create_environment(extra_search_paths: list[Path] | None = None) -> SandboxedEnvironment:
    """A sandboxed, autoescaping environment over ``frontend/templates``.

    The page controllers may build their own environment; it must autoescape HTML.
    """
    paths = [TEMPLATES_DIR, *(extra_search_paths or [])]
    return SandboxedEnvironment(
        loader=jinja2.FileSystemLoader([str(p) for p in paths]),
        autoescape=jinja2.select_autoescape(["html", "xml"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_config_panel(
    env: jinja2.Environment,
    spec: NodeTypeSpec,
    node_id: str,
    label: str,
    config: dict[str, Any],
    diagnostics: list[Diagnostic],
) -> str:
    """Render the side-panel form editing one node of type ``spec``."""
    schema = spec.config_schema or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    expression_fields = set(spec.expression_fields)

    fields = [
        _field_view(
            name,
            prop if isinstance(prop, dict) else {},
            config.get(name),
            required=name in required,
            expression=name in expression_fields,
        )
        for name, prop in properties.items()
        if name not in RESERVED_FIELDS
    ]
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


def _field_view(
    name: str, prop: dict[str, Any], value: Any, *, required: bool, expression: bool
) -> FieldView:
    view = FieldView(
        name=name,
        kind="json",
        title=str(prop.get("title") or _humanize(name)),
        description=str(prop.get("description") or ""),
        required=required,
        expression=expression,
    )
    default = prop.get("default")
    type_ = prop.get("type")

    if "enum" in prop and isinstance(prop["enum"], list):
        _enum_view(view, prop["enum"], value if value is not None else default)
        if not (expression and isinstance(value, str) and value.startswith("=")):
            return view
        # An enum field holding an expression is edited as text.
        view.options = []
        type_ = "string"

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
        if expression and isinstance(value, str):
            # An expression in a boolean field: a text box keeps it editable.
            view.value = value
        else:
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
        elif expression and isinstance(value, str) and value.startswith("="):
            view.value = value
        else:
            view.value = json.dumps(value, indent=2, ensure_ascii=False)
        view.placeholder = "" if default is None else json.dumps(default)
    return view


def _enum_view(view: FieldView, choices: list[Any], current: Any) -> None:
    view.kind = "enum"
    view.enum_json = not all(isinstance(c, str) for c in choices)
    encode = json.dumps if view.enum_json else str
    view.options = [(encode(c), str(c)) for c in choices]
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
