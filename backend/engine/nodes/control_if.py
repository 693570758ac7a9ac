"""``control.if``: routes the input to port ``true`` or ``false`` by a condition.

``condition`` is always an expression (the leading ``=`` is optional). Its truthiness
follows JSONata's ``$boolean`` (:func:`~backend.engine.nodes.base.truthy`). The output is
the step input, unchanged.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from backend.engine.nodes.base import SAME_AS_INPUT, InlineBehaviour, InlineResult, NodeType, truthy
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step


class IfConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``condition``: always an expression (stored as its text; the step gets its value,
    of any JSON type)."""

    condition: Annotated[
        Any,
        msgspec.Meta(
            title="Condition",
            description="A JSONata expression, e.g. body.amount > 100 (the = is optional)",
            extra_json_schema={"type": "string", "x-always-expression": True},
        ),
    ]


SPEC = NodeTypeSpec(
    type="control.if",
    label="If",
    kind="control",
    category="Flow",
    icon="split",
    description="Routes the input to the true or false port by a condition.",
    outputs=("true", "false"),
    config_schema=config_schema(IfConfig),
    expression_fields=("condition",),
    output_schema=SAME_AS_INPUT,
)


class If(InlineBehaviour):
    """Takes ``true`` when the condition is truthy, else ``false``."""

    config_type = IfConfig

    def evaluate(self, step: Step, config: IfConfig, data: Any) -> InlineResult:
        port = "true" if truthy(config.condition) else "false"
        return InlineResult(data, (port,))


NODE = NodeType(SPEC, If())
