"""The node config panel: an HTML form generated from a node type's config schema.

The designer canvas posts the selected node (type, id, label, config) to the server, which
answers with the fragment rendered here. The browser never gets to choose markup: every value
goes through the autoescaping template ``fragments/config_panel.html``.

Each control carries ``data-field`` (the config key; ``__label`` for the node label) and
``data-kind``, which tells ``static/js/fields.js`` how to read the value back (which schema
selects which kind: :mod:`frontend.field_views`):

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
``chips``     chips plus an ``input`` (Enter adds)   a list (items per ``data-value-kind``;
                                                     omitted when empty)
``duration``  ``input[type=text]`` (``30s``, ``5m``)  seconds as a number (omitted when empty)
``workflow``  a search box over a listbox            the chosen workflow id (omitted when none)
``group``     sub-controls with ``data-subfield``    an object of the sub-values (omitted when
                                                     every sub-control is empty)
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

Settings: every step but a trigger gets a Settings section for the reserved config keys
(``designer_schema.compiler``): ``on_error``, ``timeout`` (a duration) and, for actions
(the steps the engine retries), ``retry`` as a group of the
:class:`~designer_schema.graph.RetryPolicy` fields (:data:`RETRY_SCHEMA`).

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagnostics import Diagnostic
from designer_schema.graph import RetryPolicy
from frontend import display
from frontend.field_views import (
    DURATION_KEY,
    ENUM_LABELS_KEY,
    SUGGESTIONS_KEY,
    FieldView,
    base_view,
    enum_choices,
    field_view,
)

__all__ = [
    "CREDENTIAL_SCHEMA_KEY",
    "ENUM_LABELS_KEY",
    "RESERVED_FIELDS",
    "CredentialChoice",
    "create_environment",
    "enum_choices",
    "render_config_panel",
    "settings_views",
]

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
PANEL_TEMPLATE = "fragments/config_panel.html"

#: Config keys every node accepts, edited in the panel's "Settings" section.
RESERVED_FIELDS = ("on_error", "timeout", "retry")
ON_ERROR_CHOICES = (
    ("fail", "Fail the run"),
    ("error_port", "Continue on the error port"),
    ("continue", "Continue on the regular output"),
)

#: Error kinds offered when choosing what not to retry (any other kind can be typed):
#: the kinds the built-in connectors and the SDK raise (connectors/sdk/errors.py).
COMMON_ERROR_KINDS = (
    "http_400",
    "http_401",
    "http_403",
    "http_404",
    "http_409",
    "http_422",
    "http_429",
    "http_500",
    "http_502",
    "http_503",
    "http_timeout",
    "http_transport",
    "ssrf_blocked",
    "config",
    "template_error",
    "smtp_auth",
    "smtp_connect",
    "smtp_recipients_refused",
)

_DEFAULT_RETRY = RetryPolicy()
RETRY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Retry",
    "properties": {
        "max_attempts": {
            "type": "integer",
            "minimum": 1,
            "default": _DEFAULT_RETRY.max_attempts,
            "title": "Attempts",
            "description": "Counts the first attempt: 1 means no retry.",
        },
        "initial_interval": {
            "type": "number",
            DURATION_KEY: True,
            "minimum": 0,
            "default": _DEFAULT_RETRY.initial_interval,
            "title": "First retry after",
        },
        "backoff_coefficient": {
            "type": "number",
            "minimum": 1,
            "default": _DEFAULT_RETRY.backoff_coefficient,
            "title": "Backoff factor",
            "description": "Each wait is the previous one times this (1: constant).",
        },
        "max_interval": {
            "type": "number",
            DURATION_KEY: True,
            "minimum": 0,
            "default": _DEFAULT_RETRY.max_interval,
            "title": "Longest wait",
        },
        "jitter": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "default": _DEFAULT_RETRY.jitter,
            "title": "Jitter",
            "description": "Random spread of each wait: 0.1 is ±10 %.",
        },
        "non_retryable_error_kinds": {
            "type": "array",
            "items": {"type": "string"},
            SUGGESTIONS_KEY: list(COMMON_ERROR_KINDS),
            "title": "Never retry on",
            "description": "Error kinds that fail the step at once, e.g. http_404.",
        },
    },
}
"""The panel's form of the reserved ``retry`` key (:class:`RetryPolicy`; defaults from it)."""

TIMEOUT_SCHEMA: dict[str, Any] = {
    "type": "number",
    DURATION_KEY: True,
    "title": "Timeout per attempt",
    "description": "Empty: no limit. An attempt over it fails with kind timeout.",
}


CREDENTIAL_SCHEMA_KEY = "x-credential-type"


@dataclass(frozen=True)
class CredentialChoice:
    """A saved credential as the picker shows it: id, name, type and a masked ``hint``
    (``"••••1234"``, ``"connected"``); never secret material."""

    id: str
    name: str
    type: str
    hint: str = ""


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


def settings_views(spec: NodeTypeSpec, config: Mapping[str, Any]) -> list[FieldView]:
    """The Settings section's fields of a step of ``spec``: the retry policy (a group of
    :data:`RETRY_SCHEMA`'s fields; actions only, as only actions are retried) and the
    timeout (a duration). Empty for triggers."""
    if spec.kind == "trigger":
        return []
    views: list[FieldView] = []
    if spec.kind == "action":
        retry = config.get("retry")
        current = retry if isinstance(retry, Mapping) else {}
        group = base_view("retry", RETRY_SCHEMA, "group", required=False)
        for name, prop in RETRY_SCHEMA["properties"].items():
            sub = field_view(name, prop, current.get(name), required=False, expression=False)
            sub.path = f"retry.{name}"
            group.subfields.append(sub)
        views.append(group)
    views.append(
        field_view(
            "timeout", TIMEOUT_SCHEMA, config.get("timeout"), required=False, expression=False
        )
    )
    return views


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
    workflow_names: Mapping[str, str] | None = None,
    trigger_kind: str = "",
    trigger_example: bool = False,
) -> str:
    """Render the side-panel form editing one node of type ``spec``.

    ``credentials`` are the saved credentials the pickers may offer (each picker keeps
    those of its field's types); ``credential_type_labels`` maps a credential type name to
    its label for the "New ..." links; ``return_to`` is the designer's path (same-site,
    starting with ``/``) the credentials page sends the user back to; ``workflow_names``
    maps the workflow ids the config names to the names workflow pickers show (ids the
    user may not read are left out and shown as an id). ``trigger_kind`` (a connector
    trigger's kind: ``polling``, ``app_webhook``, ...) and ``trigger_example`` (it has an
    example event) become ``data-trigger-kind`` / ``data-trigger-example`` on the form,
    where the designer adds its "Fetch test event" section (trigger-panels.js).
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
            view = field_view(
                name,
                prop,
                config.get(name),
                required=name in required,
                expression=name in expression_fields,
            )
            if view.kind == "workflow":
                view.workflow_name = (workflow_names or {}).get(view.value, "")
        fields.append(view)
    settings = settings_views(spec, config)
    by_path = {f.path: f for f in fields}
    for group in settings:
        by_path[group.path] = group
        by_path.update((sub.path, sub) for sub in group.subfields)

    node_errors: list[Diagnostic] = []
    for diag in diagnostics:
        if diag.node_id != node_id:
            continue
        target = None
        if diag.field:
            target = by_path.get(diag.field) or by_path.get(_top_field(diag.field))
        if target is not None:
            target.errors.append(diag.message)
        else:
            node_errors.append(diag)

    return env.get_template(PANEL_TEMPLATE).render(
        spec=spec,
        node_id=node_id,
        label=label,
        fields=fields,
        settings=settings,
        node_errors=node_errors,
        on_error=config.get("on_error") or "fail",
        on_error_choices=ON_ERROR_CHOICES,
        trigger_kind=trigger_kind,
        trigger_example=trigger_example,
    )


def _top_field(path: str) -> str:
    """``mapping.total`` -> ``mapping``; ``items[0].name`` -> ``items``."""
    return path.split(".", 1)[0].split("[", 1)[0]


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
    view = base_view(name, prop, "credential", required=required)
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
