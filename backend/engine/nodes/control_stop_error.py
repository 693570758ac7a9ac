"""``control.stop_error``: fails the step with ``message`` and error kind ``error_kind``
(default ``stop_error``), so the run fails unless the node's ``on_error`` routes it."""

from __future__ import annotations

from typing import Any

from backend.engine.nodes.base import InlineBehaviour, InlineResult, NodeError, NodeType
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

SPEC = NodeTypeSpec(
    type="control.stop_error",
    label="Stop and Error",
    kind="control",
    category="Flow",
    icon="octagon-x",
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
    output_schema={"description": "None: the step always fails."},
)


class StopError(InlineBehaviour):
    """Always raises :class:`NodeError`."""

    def evaluate(self, step: Step, config: dict[str, Any], data: Any) -> InlineResult:
        kind = config.get("error_kind") or "stop_error"
        raise NodeError(str(config.get("message") or "stopped"), kind=str(kind))


NODE = NodeType(SPEC, StopError())
