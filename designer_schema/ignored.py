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
- ``unanswered_branch``: the reverse. With a trigger configured so that such a step
  answers (a Webhook whose *Respond* is "When a Respond to Webhook step answers"), a
  branch of the flow that can end without passing one: its callers get ``202`` (the run
  id) instead of an answer. Reported on the step where the branch ends, naming the
  unconnected port when it is one of several (an If's ``false``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagram import Node

IGNORED_CODES: Final = (
    "unknown_config_key",
    "ignored_setting",
    "ignored_step",
    "unanswered_branch",
)
"""Codes of the warnings this module emits."""

REQUIRES_TRIGGER: Final = "x-requires-trigger"
"""Config-schema key: ``{"type": <trigger type>, "config": {field: [allowed values]}}``."""

ANSWERED_BY_STEP: Final = "x-answered-by-step"
"""Trigger config-property key: the values of that field with which a step of the flow
(one whose ``x-requires-trigger`` the trigger meets) answers the caller."""

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


def check_answered_branches(
    nodes: Mapping[str, Node],
    specs: Mapping[str, NodeTypeSpec],
    outputs: Mapping[str, tuple[str, ...]],
    edges: list[tuple[str, str, str]],
    trigger_id: str,
    emit: Emit,
) -> None:
    """Warn about each branch from the trigger that ends without a step whose
    ``x-requires-trigger`` the trigger meets, when the trigger waits for such a step (a
    config field marked :data:`ANSWERED_BY_STEP` holds one of its values). ``outputs``:
    each node's output ports; ``edges``: ``(source, port, target)``; ports named
    ``error`` are not branches of the flow."""
    answering = {
        node_id
        for node_id, spec in specs.items()
        if node_id != trigger_id and _meets(nodes[trigger_id], specs[trigger_id], spec)
    }
    if not _waits_for_answer(nodes[trigger_id], specs[trigger_id]):
        return
    wired: dict[str, dict[str, list[str]]] = {}
    for source, port, target in edges:
        wired.setdefault(source, {}).setdefault(port, []).append(target)
    seen = {trigger_id}
    todo = [trigger_id]
    while todo:
        node_id = todo.pop()
        ports = [p for p in outputs.get(node_id, ()) if p != "error"]
        ends = [p for p in ports if not wired.get(node_id, {}).get(p)]
        if ends and (len(ends) == len(ports) or node_id != trigger_id):
            where = f" (its {', '.join(repr(p) for p in ends)} port)" if len(ports) > 1 else ""
            emit(
                "unanswered_branch",
                f"a run ending here{where} never answers the webhook: the caller gets 202 "
                "with the run id instead; add a Respond to Webhook step on this branch",
                node_id=node_id,
                severity="warning",
            )
        for port in ports:
            for target in wired.get(node_id, {}).get(port, []):
                if target not in seen and target not in answering:
                    seen.add(target)
                    todo.append(target)


def _meets(trigger: Node, trigger_spec: NodeTypeSpec, spec: NodeTypeSpec) -> bool:
    """Whether ``trigger`` meets ``spec``'s ``x-requires-trigger``."""
    need = (spec.config_schema or {}).get(REQUIRES_TRIGGER)
    if not isinstance(need, Mapping) or need.get("type") != trigger.type:
        return False
    wanted = need.get("config")
    for field, allowed in wanted.items() if isinstance(wanted, Mapping) else ():
        value = _value_or_default(trigger.config, trigger_spec, field)
        choices = list(allowed) if isinstance(allowed, list | tuple) else [allowed]
        if not any(_same(value, choice) for choice in choices):
            return False
    return True


def _waits_for_answer(trigger: Node, trigger_spec: NodeTypeSpec) -> bool:
    """Whether a config field of the trigger marked :data:`ANSWERED_BY_STEP` holds one of
    the values listed there (the Webhook's *Respond* = ``respond_node``)."""
    properties = (trigger_spec.config_schema or {}).get("properties")
    for field, prop in properties.items() if isinstance(properties, Mapping) else ():
        values = prop.get(ANSWERED_BY_STEP) if isinstance(prop, Mapping) else None
        if isinstance(values, list) and any(
            _same(_value_or_default(trigger.config, trigger_spec, field), v) for v in values
        ):
            return True
    return False


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
