"""``control.if``: routes the input to port ``true`` or ``false`` by a condition.

``condition`` is always an expression (the leading ``=`` is optional). Its truthiness
follows JSONata's ``$boolean`` (:func:`~backend.engine.nodes.base.truthy`). The output is
the step input, unchanged.
"""

from __future__ import annotations

from typing import Any

from backend.engine.nodes.base import SAME_AS_INPUT, InlineBehaviour, InlineResult, NodeType, truthy
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

SPEC = NodeTypeSpec(
    type="control.if",
    label="If",
    kind="control",
    category="Flow",
    icon="split",
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
    output_schema=SAME_AS_INPUT,
)


class If(InlineBehaviour):
    """Takes ``true`` when the condition is truthy, else ``false``."""

    def evaluate(self, step: Step, config: dict[str, Any], data: Any) -> InlineResult:
        port = "true" if truthy(config.get("condition")) else "false"
        return InlineResult(data, (port,))


NODE = NodeType(SPEC, If())
