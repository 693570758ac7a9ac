"""``trigger.manual``: the designer's Run button and ``POST /api/workflows/{id}/runs``.

The run input is whatever the caller sent; the trigger step outputs it unchanged.

``input_schema`` (optional, a JSON Schema) declares that input: the shape a For each or
Sub-workflow caller passes (its settings list it as "What each child run receives"), or
what an API caller sends. It types the trigger's output for the designer (field picker,
typed mappings) and for the compiler, so an expression reading a field the schema lacks
is an ``unknown_field`` error and the workflow cannot be published until it reads what
its callers pass (``"x-schema-from"`` in designer_schema/dataflow.py). Runs are not
checked against it.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from backend.engine.nodes.base import NodeType, TriggerBehaviour
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec


class ManualConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``input_schema``: a JSON Schema object describing the run input (``None``: none)."""

    input_schema: (
        Annotated[
            dict[str, Any],
            msgspec.Meta(
                title="Input schema",
                description="JSON Schema of the run input, e.g. what a For each or "
                "Sub-workflow caller passes (its settings show it); expressions reading "
                "fields it lacks are errors",
            ),
        ]
        | None
    ) = None


SPEC = NodeTypeSpec(
    type="trigger.manual",
    label="Manual trigger",
    kind="trigger",
    category="Triggers",
    icon="play",
    description="Starts a run from the designer's Run button or the API; output is the input.",
    inputs=(),
    outputs=("out",),
    config_schema=config_schema(ManualConfig),
    output_schema={"description": "The run input, as sent.", "x-schema-from": "input_schema"},
)


class Manual(TriggerBehaviour):
    """Its step completes with the run input; its config is a :class:`ManualConfig`."""

    config_type = ManualConfig


NODE = NodeType(SPEC, Manual())
