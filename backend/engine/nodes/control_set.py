"""``control.set``: builds a new object from ``mapping`` (each value literal or expression).

``mapping`` is an ordered field list (:mod:`designer_schema.ordered_fields`): the output's
keys come in the order of its entries. With ``keep_input`` the mapping is merged over the
input object. Like a JSONata object
constructor, a field whose expression matched nothing is left out (jsonata-python returns
no value and null alike, so a null result is left out too).
"""

from __future__ import annotations

from typing import Any

from backend.engine.nodes.base import InlineBehaviour, InlineResult, NodeError, NodeType
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step
from designer_schema.ordered_fields import field_entries, ordered_fields_schema

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
            "mapping": ordered_fields_schema(
                "Fields", "Field name -> value, in order; =expression values are computed."
            ),
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
        entries = field_entries(config.get("mapping") or {})
        if entries is None:
            raise NodeError("mapping must be a list of fields (or an object)", field="mapping")
        output: dict[str, Any] = {}
        if config.get("keep_input") and isinstance(data, dict):
            output.update(data)
        output.update(
            (name, value)
            for name, value, path in entries
            if value is not None or f"mapping.{path}" not in step.expressions
        )
        return InlineResult(output)


NODE = NodeType(SPEC, Set())
