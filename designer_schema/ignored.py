"""Warnings for what a run would silently ignore (pure; part of :mod:`designer_schema.compiler`).

Each is a ``warning``: publishing still works, but the designer shows it in the Problems
list and the publish answer carries it.

- ``unknown_config_key``: a config key that is neither a property of the node type's
  config schema nor a reserved key (``retry``, ``timeout``, ``join``, ``on_error``). Node
  types whose schema allows ``additionalProperties`` accept any key.
- ``ignored_setting``: ``retry`` on a step that is not an action: only actions run on
  workers and are retried; flow steps (If, Set, Sub-workflow, ...) run in the engine.
- ``ignored_step``: a node type that only works with a certain trigger configuration
  (its config schema's ``"x-requires-trigger"``) in a workflow whose trigger is another
  type, or is configured otherwise. The Respond to Webhook step declares
  ``{"type": "trigger.webhook", "config": {"respond": ["respond_node"]}}``: with a Webhook
  that answers immediately (or a schedule), its response is never sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagram import Node

IGNORED_CODES: Final = ("unknown_config_key", "ignored_setting", "ignored_step")
"""Codes of the warnings this module emits."""

REQUIRES_TRIGGER: Final = "x-requires-trigger"
"""Config-schema key: ``{"type": <trigger type>, "config": {field: [allowed values]}}``."""

Emit = Callable[..., None]
"""``emit(code, message, *, node_id=, field=, severity="warning")`` (the compiler's sink)."""


def check_node_keys(node: Node, spec: NodeTypeSpec, reserved: frozenset[str], emit: Emit) -> None:
    """Warn about config keys ``spec``'s schema does not know (and ``retry`` on a step
    that is never retried)."""
    schema = spec.config_schema or {}
    properties = schema.get("properties")
    known = set(properties) if isinstance(properties, Mapping) else set()
    if not schema.get("additionalProperties"):
        for key in node.config:
            if key in known or key in reserved:
                continue
            emit(
                "unknown_config_key",
                f"{key!r} is not a setting of {spec.label}, so runs ignore it; remove it "
                "or check its spelling",
                node_id=node.id,
                field=str(key),
                severity="warning",
            )
    if spec.kind != "action" and node.config.get("retry") is not None:
        emit(
            "ignored_setting",
            f"retry has no effect on a {spec.label} step: only actions are retried",
            node_id=node.id,
            field="retry",
            severity="warning",
        )


def check_trigger_needs(
    nodes: Mapping[str, Node],
    specs: Mapping[str, NodeTypeSpec],
    trigger_id: str,
    emit: Emit,
) -> None:
    """Warn about each node whose ``x-requires-trigger`` the workflow's trigger does not
    meet (see the module docstring)."""
    trigger = nodes[trigger_id]
    trigger_spec = specs[trigger_id]
    for node_id, spec in specs.items():
        need = (spec.config_schema or {}).get(REQUIRES_TRIGGER)
        if not isinstance(need, Mapping) or node_id == trigger_id:
            continue
        wanted_type = need.get("type")
        if isinstance(wanted_type, str) and wanted_type != trigger.type:
            emit(
                "ignored_step",
                f"{spec.label} only works when the workflow starts with a "
                f"{_type_label(wanted_type, specs)} trigger; this one starts with "
                f"{trigger_spec.label}, so the step does nothing",
                node_id=node_id,
                severity="warning",
            )
            continue
        wanted = need.get("config")
        for field, allowed in wanted.items() if isinstance(wanted, Mapping) else ():
            value = _value_or_default(trigger.config, trigger_spec, field)
            choices = list(allowed) if isinstance(allowed, list | tuple) else [allowed]
            if any(_same(value, choice) for choice in choices):
                continue
            prop = _property(trigger_spec, field)
            title = str(prop.get("title") or field)
            emit(
                "ignored_step",
                f"{spec.label} is ignored: the {trigger_spec.label} trigger's {title} is "
                f"{_choice_label(prop, value)!r}; set it to "
                + " or ".join(repr(_choice_label(prop, c)) for c in choices)
                + " for this step to answer",
                node_id=node_id,
                severity="warning",
            )


def _type_label(node_type: str, specs: Mapping[str, NodeTypeSpec]) -> str:
    for spec in specs.values():
        if spec.type == node_type:
            return spec.label
    return node_type.rsplit(".", 1)[-1].replace("_", " ").capitalize()


def _property(spec: NodeTypeSpec, field: str) -> Mapping[str, Any]:
    properties = (spec.config_schema or {}).get("properties")
    prop = properties.get(field) if isinstance(properties, Mapping) else None
    return prop if isinstance(prop, Mapping) else {}


def _value_or_default(config: Mapping[str, Any], spec: NodeTypeSpec, field: str) -> Any:
    value = config.get(field)
    return _property(spec, field).get("default") if value is None else value


def _choice_label(prop: Mapping[str, Any], value: Any) -> str:
    labels = prop.get("x-enum-labels")
    key = value if isinstance(value, str) else json.dumps(value)
    if isinstance(labels, Mapping) and key in labels:
        return str(labels[key])
    return key


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
