"""``control.stop_error``: fails the step with ``message`` and error kind ``error_kind``
(default ``stop_error``), so the run fails unless the node's ``on_error`` routes it."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from backend.engine.nodes.base import InlineBehaviour, InlineResult, NodeError, NodeType
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step


class StopErrorConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``message`` (text, or an expression's value of any type, shown as text; empty:
    ``stopped``) and ``error_kind`` (empty: ``stop_error``)."""

    message: Annotated[Any, msgspec.Meta(title="Message", extra_json_schema={"type": "string"})]
    error_kind: Annotated[str, msgspec.Meta(title="Error kind")] = "stop_error"


SPEC = NodeTypeSpec(
    type="control.stop_error",
    label="Stop and Error",
    kind="control",
    category="Flow",
    icon="octagon-x",
    description="Fails the run with a message.",
    outputs=(),
    config_schema=config_schema(StopErrorConfig),
    expression_fields=("message",),
    output_schema={"description": "None: the step always fails."},
)


class StopError(InlineBehaviour):
    """Always raises :class:`NodeError`."""

    config_type = StopErrorConfig

    def evaluate(self, step: Step, config: StopErrorConfig, data: Any) -> InlineResult:
        raise NodeError(str(config.message or "stopped"), kind=config.error_kind or "stop_error")


NODE = NodeType(SPEC, StopError())
