"""Flow node types beyond If/Set/Respond: see the modules for their semantics.

- :mod:`.flow`: Switch, Join, Stop and Error (inline, deterministic).
- :mod:`.waits`: Delay and Wait Until (durable timers).
- :mod:`.calls`: Sub-workflow call and For-each (child runs).
"""

from __future__ import annotations

from backend.engine.nodes.calls import CALL_TYPES, CONTROL_FOREACH, CONTROL_SUBWORKFLOW
from backend.engine.nodes.flow import (
    CONTROL_JOIN,
    CONTROL_STOP_ERROR,
    CONTROL_SWITCH,
    FLOW_INLINE_TYPES,
)
from backend.engine.nodes.waits import CONTROL_DELAY, CONTROL_WAIT_UNTIL, TIMER_TYPES
from designer_schema.catalog import NodeTypeSpec

FLOW_NODE_TYPES: list[NodeTypeSpec] = [
    CONTROL_SWITCH,
    CONTROL_JOIN,
    CONTROL_STOP_ERROR,
    CONTROL_DELAY,
    CONTROL_WAIT_UNTIL,
    CONTROL_SUBWORKFLOW,
    CONTROL_FOREACH,
]
"""Palette order of the flow node types this package adds to the catalog."""

WAIT_TYPES = TIMER_TYPES | CALL_TYPES
"""Node types whose steps wait durably (no worker) while the run is ``waiting``."""

__all__ = ["FLOW_INLINE_TYPES", "FLOW_NODE_TYPES", "WAIT_TYPES"]
