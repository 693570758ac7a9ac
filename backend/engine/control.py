"""Built-in node types the engine evaluates itself: triggers and inline control nodes.

Control nodes are cheap and deterministic, so ``advance`` evaluates them inline inside the
orchestration transaction instead of dispatching a job (DESIGN.md, execution model):

- ``trigger.webhook`` / ``trigger.manual``: output is the run input.
- ``control.if``: ``condition`` (usually an expression) -> port ``true`` or ``false``;
  output is the step input, passed through unchanged.
- ``control.set``: ``mapping`` (object; each value literal or ``=expression``) -> output is
  the mapped object. With ``keep_input`` the mapping is merged over the input object.
- ``control.respond``: ``status`` (int), ``headers`` (object), ``body`` -> records the
  webhook response on the run; output is ``{"status", "headers", "body"}``.

Truthiness of an If condition follows JSONata's boolean casting (``$boolean``): empty
string, 0, null, empty array/object and false are false.
"""

from __future__ import annotations

from typing import Any

from backend.engine.expressions import ExpressionError, resolve_config
from backend.engine.triggers import TRIGGER_NODE_TYPES
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

CONTROL_IF = NodeTypeSpec(
    type="control.if",
    label="If",
    kind="control",
    category="Flow",
    icon="branch",
    description="Routes the input to the true or false port by a condition.",
    outputs=("true", "false"),
    config_schema={
        "type": "object",
        "properties": {
            "condition": {
                "type": "string",
                "title": "Condition",
                "description": "A JSONata expression, e.g. body.amount > 100 (the = is optional)",
                "x-always-expression": True,
            }
        },
        "required": ["condition"],
    },
    expression_fields=("condition",),
)

CONTROL_SET = NodeTypeSpec(
    type="control.set",
    label="Set",
    kind="control",
    category="Data",
    icon="edit",
    description="Builds a new object: each field is a literal or a JSONata expression.",
    config_schema={
        "type": "object",
        "properties": {
            "mapping": {
                "type": "object",
                "additionalProperties": True,
                "title": "Fields",
                "description": "Field name -> value; =expression values are computed.",
            },
            "keep_input": {
                "type": "boolean",
                "default": False,
                "title": "Keep input fields",
            },
        },
        "required": ["mapping"],
    },
    expression_fields=("mapping",),
)

CONTROL_RESPOND = NodeTypeSpec(
    type="control.respond",
    label="Respond to Webhook",
    kind="control",
    category="Flow",
    icon="reply",
    description="Sets the HTTP response of a webhook trigger that waits for it.",
    config_schema={
        "type": "object",
        "properties": {
            "status": {"type": "integer", "default": 200, "title": "Status code"},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "title": "Headers",
            },
            "body": {
                "title": "Body",
                "description": "JSON value or =expression; empty sends the step input",
            },
        },
    },
    expression_fields=("status", "headers", "body"),
)

CONTROL_NODE_TYPES: list[NodeTypeSpec] = [
    *TRIGGER_NODE_TYPES,
    CONTROL_IF,
    CONTROL_SET,
    CONTROL_RESPOND,
]


class ControlError(Exception):
    """A control node could not be evaluated; ``kind`` classifies it, ``field`` says where."""

    def __init__(self, message: str, *, kind: str = "control_error", field: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.field = field


def truthy(value: Any) -> bool:
    """JSONata's ``$boolean`` casting rules."""
    if isinstance(value, list):
        return any(truthy(v) for v in value)
    if isinstance(value, dict):
        return bool(value)
    return bool(value)


def evaluate_control(
    step: Step, data: Any, bindings: dict[str, Any]
) -> tuple[Any, tuple[str, ...], dict[str, Any] | None]:
    """Evaluate control step ``step`` on input ``data``.

    Returns ``(output, ports taken, webhook response or None)``; raises
    :class:`ControlError` when an expression fails or the node type is not a control node.
    """
    try:
        config = resolve_config(step.config, step.expressions, data, bindings)
    except ExpressionError as exc:
        raise ControlError(str(exc), kind="expression_error", field=exc.field) from exc
    if step.type == "control.if":
        port = "true" if truthy(config.get("condition")) else "false"
        return data, (port,), None
    if step.type == "control.set":
        mapping = config.get("mapping") or {}
        if not isinstance(mapping, dict):
            raise ControlError("mapping must be an object", field="mapping")
        output: dict[str, Any] = {}
        if config.get("keep_input") and isinstance(data, dict):
            output.update(data)
        # Like a JSONata object constructor: a field whose expression matched nothing is
        # left out (jsonata-python returns no value and null alike, so null results too).
        output.update(
            (key, value)
            for key, value in mapping.items()
            if value is not None or f"mapping.{key}" not in step.expressions
        )
        return output, ("out",), None
    if step.type == "control.respond":
        status = config.get("status", 200)
        if status is None:
            status = 200
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise ControlError(
                f"status must be an HTTP status code, got {status!r}", field="status"
            )
        headers = config.get("headers") or {}
        if not isinstance(headers, dict):
            raise ControlError("headers must be an object", field="headers")
        response = {
            "status": status,
            "headers": {str(k): str(v) for k, v in headers.items()},
            "body": config["body"] if "body" in config else data,
        }
        return response, ("out",), response
    raise ControlError(f"{step.type} is not a control node", kind="unknown_node_type")
