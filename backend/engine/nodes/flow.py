"""Inline flow nodes: Switch, Join and Stop and Error.

They are cheap and deterministic, so ``advance`` evaluates them inside the orchestration
transaction, like ``control.if`` (see :mod:`backend.engine.control`).

- ``control.switch``: ``cases`` (a literal list of case names; each becomes an output port,
  :attr:`NodeTypeSpec.dynamic_outputs`) plus the fixed ``default`` port. With ``rules``
  (case name -> condition, usually an expression) the cases whose condition is truthy
  match; without rules a case matches when it equals ``value`` (compared as text). ``mode``
  ``first`` (default) takes the first matching case in ``cases`` order; ``all`` takes every
  matching case (multi-choice: several branches run in parallel). No match takes
  ``default``. Output: the input, unchanged.
- ``control.join``: merges branches. ``mode`` ``all`` (default: every *activated* incoming
  branch; branches not taken never block), ``first`` (the first arrival fires; later
  arrivals are ignored and never fire the join again) or ``n_of_m`` (fires after ``count``
  arrivals, or with what arrived once every branch is resolved). Output shape, whatever
  the wiring: an object mapping each arrived predecessor's step id to its output, in graph
  edge order (``{"a": [], "b": {"b": 1}}``), even when only one branch arrived.
- ``control.stop_error``: fails the step (and so the run, unless the node's ``on_error``
  routes it) with ``message`` and error kind ``error_kind`` (default ``stop_error``).
"""

from __future__ import annotations

from typing import Any

from backend.engine.control import ControlError, truthy
from backend.engine.expressions import ExpressionError, resolve_config
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import JoinMode, JoinSpec, Step

SWITCH = "control.switch"
JOIN = "control.join"
STOP_ERROR = "control.stop_error"
DEFAULT_PORT = "default"

CONTROL_SWITCH = NodeTypeSpec(
    type=SWITCH,
    label="Switch",
    kind="control",
    category="Flow",
    icon="switch",
    description=(
        "Routes the input to one (or, in mode all, every) matching case port, else to default."
    ),
    outputs=(DEFAULT_PORT,),
    dynamic_outputs="cases",
    config_schema={
        "type": "object",
        "properties": {
            "value": {
                "title": "Value",
                "description": "Matched against case names, e.g. =body.kind",
            },
            "cases": {
                "type": "array",
                "items": {"type": "string"},
                "title": "Cases",
                "description": "Case names; each becomes an output port.",
            },
            "rules": {
                "type": "object",
                "additionalProperties": True,
                "title": "Rules",
                "description": "Case name -> condition (=expression); overrides Value.",
            },
            "mode": {
                "type": "string",
                "enum": ["first", "all"],
                "x-enum-labels": {"first": "First matching case", "all": "All matching cases"},
                "default": "first",
                "title": "Match",
            },
        },
        "required": ["cases"],
    },
    expression_fields=("value", "rules"),
)

CONTROL_JOIN = NodeTypeSpec(
    type=JOIN,
    label="Join",
    kind="control",
    category="Flow",
    icon="merge",
    description=(
        "Waits for incoming branches (all activated, first arrival, or N of M) and outputs "
        "an object keyed by the arrived steps' ids."
    ),
    config_schema={
        "type": "object",
        "properties": {
            "mode": {
                "type": "string",
                "enum": ["all", "first", "n_of_m"],
                "x-enum-labels": {
                    "all": "All activated branches",
                    "first": "First arrival",
                    "n_of_m": "N of the branches",
                },
                "default": "all",
                "title": "Wait for",
            },
            "count": {"type": "integer", "default": 1, "title": "N (for n_of_m)"},
        },
    },
)

CONTROL_STOP_ERROR = NodeTypeSpec(
    type=STOP_ERROR,
    label="Stop and Error",
    kind="control",
    category="Flow",
    icon="stop",
    description="Fails the run with a message.",
    outputs=(),
    config_schema={
        "type": "object",
        "properties": {
            "message": {"type": "string", "title": "Message"},
            "error_kind": {"type": "string", "default": "stop_error", "title": "Error kind"},
        },
        "required": ["message"],
    },
    expression_fields=("message",),
)

FLOW_INLINE_TYPES = frozenset({SWITCH, JOIN, STOP_ERROR})


FlowError = ControlError
"""Flow nodes fail like control nodes: ``kind`` classifies, ``field`` names the field."""


def join_spec(step: Step) -> JoinSpec:
    """What ``step`` waits for: a Join node's ``mode``/``count`` config, else ``step.join``."""
    if step.type != JOIN:
        return step.join
    mode: JoinMode = "all"
    for known in ("all", "first", "n_of_m"):
        if step.config.get("mode") == known:
            mode = known
    count = step.config.get("count") or 1
    return JoinSpec(mode=mode, count=count if isinstance(count, int) else 1)


def evaluate_flow(step: Step, data: Any, bindings: dict[str, Any]) -> tuple[Any, tuple[str, ...]]:
    """Evaluate inline flow node ``step`` on input ``data``: ``(output, ports taken)``.

    Raises :class:`FlowError` for expression errors, bad config and Stop and Error.
    """
    try:
        config = resolve_config(step.config, step.expressions, data, bindings)
    except ExpressionError as exc:
        raise FlowError(str(exc), kind="expression_error", field=exc.field) from exc
    if step.type == SWITCH:
        return data, _switch_ports(config)
    if step.type == JOIN:
        return data, ("out",)
    if step.type == STOP_ERROR:
        kind = config.get("error_kind") or "stop_error"
        raise FlowError(str(config.get("message") or "stopped"), kind=str(kind))
    raise FlowError(f"{step.type} is not a flow node", kind="unknown_node_type")


def _switch_ports(config: dict[str, Any]) -> tuple[str, ...]:
    cases = [c for c in config.get("cases") or [] if isinstance(c, str)]
    rules = config.get("rules")
    if rules is not None and not isinstance(rules, dict):
        raise FlowError("rules must be an object of case -> condition", field="rules")
    if rules:
        matched = [c for c in cases if truthy(rules.get(c))]
    else:
        value = config.get("value")
        text = value if isinstance(value, str) else None if value is None else _text(value)
        matched = [c for c in cases if c == text]
    if not matched:
        return (DEFAULT_PORT,)
    return tuple(matched) if config.get("mode") == "all" else (matched[0],)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
