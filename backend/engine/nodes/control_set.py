"""``control.set``: builds a new object from ``mapping`` (each value literal or expression).

With ``keep_input`` the mapping is merged over the input object. Like a JSONata object
constructor, a field whose expression matched nothing is left out (jsonata-python returns
no value and null alike, so a null result is left out too).
"""

from __future__ import annotations

from typing import Any

from backend.engine.nodes.base import InlineBehaviour, InlineResult, NodeError, NodeType
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

SPEC = NodeTypeSpec(
    type="control.set",
    label="Set",
    kind="control",
    category="Data",
    icon="pencil",
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
    output_schema={
        "type": "object",
        "description": "The mapped fields (over the input's fields with Keep input fields).",
        "x-fields-from": "mapping",
        "x-merge-input-if": "keep_input",
    },
)


class Set(InlineBehaviour):
    """Outputs the mapped object."""

    def evaluate(self, step: Step, config: dict[str, Any], data: Any) -> InlineResult:
        mapping = config.get("mapping") or {}
        if not isinstance(mapping, dict):
            raise NodeError("mapping must be an object", field="mapping")
        output: dict[str, Any] = {}
        if config.get("keep_input") and isinstance(data, dict):
            output.update(data)
        output.update(
            (key, value)
            for key, value in mapping.items()
            if value is not None or f"mapping.{key}" not in step.expressions
        )
        return InlineResult(output)


NODE = NodeType(SPEC, Set())
