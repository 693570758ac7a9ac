"""``trigger.manual``: the designer's Run button and ``POST /api/workflows/{id}/runs``.

The run input is whatever the caller sent; the trigger step outputs it unchanged.
"""

from __future__ import annotations

from backend.engine.nodes.base import NodeType, TriggerBehaviour
from designer_schema.catalog import NodeTypeSpec

SPEC = NodeTypeSpec(
    type="trigger.manual",
    label="Manual trigger",
    kind="trigger",
    category="Triggers",
    icon="play",
    description="Starts a run from the designer's Run button or the API; output is the input.",
    inputs=(),
    outputs=("out",),
    output_schema={"description": "The run input, as sent."},
)

NODE = NodeType(SPEC, TriggerBehaviour())
