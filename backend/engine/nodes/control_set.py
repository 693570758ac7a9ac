"""``control.set``: builds a new object from ``mapping`` (each value literal or expression).

``mapping`` is an ordered field list (:mod:`designer_schema.ordered_fields`): the output's
keys come in the order of its entries. With ``keep_input`` the mapping is merged over the
input object. Like a JSONata object
constructor, a field whose expression matched nothing is left out (jsonata-python returns
no value and null alike, so a null result is left out too).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from backend.engine.nodes.base import InlineBehaviour, InlineResult, NodeType
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step
from designer_schema.ordered_fields import field_entries, ordered_fields_schema


class SetConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``mapping``: the ordered field list (a list of ``{"name", "value"}`` entries, or
    an object in older configs); ``keep_input``: merge the mapping over the input."""

    mapping: Annotated[
        list[Any] | dict[str, Any],
        msgspec.Meta(
            extra_json_schema=ordered_fields_schema(
                "Fields", "Field name -> value, in order; =expression values are computed."
            )
        ),
    ]
    keep_input: Annotated[bool, msgspec.Meta(title="Keep input fields")] = False


SPEC = NodeTypeSpec(
    type="control.set",
    label="Set",
    kind="control",
    category="Data",
    icon="pencil",
    description="Builds a new object: each field is a literal or a JSONata expression.",
    config_schema=config_schema(SetConfig),
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

    config_type = SetConfig

    def input_blind(self, step: Step) -> bool:
        """Blind to its input unless *Keep input fields* is on (or computed)."""
        return step.config.get("keep_input") is False or (
            "keep_input" not in step.config and "keep_input" not in step.expressions
        )

    def evaluate(self, step: Step, config: SetConfig, data: Any) -> InlineResult:
        entries = field_entries(config.mapping) or []  # the Struct admits only its two forms
        output: dict[str, Any] = {}
        if config.keep_input and isinstance(data, dict):
            output.update(data)
        output.update(
            (name, value)
            for name, value, path in entries
            if value is not None or f"mapping.{path}" not in step.expressions
        )
        return InlineResult(output)


NODE = NodeType(SPEC, Set())
