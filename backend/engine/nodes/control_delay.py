"""``control.delay``: waits ``seconds`` (a number >= 0, may be an expression) on a durable
timer, then passes its input on.

A timer step holds no worker: when it becomes ready the engine stores its due time as the
step's ``not_before`` (a row in PostgreSQL); the dispatcher gets a deferred job for that
time (prompt) and the sweeper re-dispatches due ready steps (certain). Firing the timer
(:func:`backend.engine.orchestrator.fire_timer`) completes the step with its input.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from backend.engine.nodes.base import SAME_AS_INPUT, NodeError, NodeType, TimerBehaviour
from designer_schema.catalog import NodeTypeSpec

SPEC = NodeTypeSpec(
    type="control.delay",
    label="Delay",
    kind="control",
    category="Flow",
    icon="timer",
    description="Waits a number of seconds on a durable timer, then passes the input on.",
    config_schema={
        "type": "object",
        "properties": {
            "seconds": {"type": "number", "title": "Wait", "minimum": 0, "x-duration": True}
        },
        "required": ["seconds"],
    },
    expression_fields=("seconds",),
    output_schema=SAME_AS_INPUT,
)


class Delay(TimerBehaviour):
    """Due ``seconds`` after the step became ready."""

    def due(self, config: dict[str, Any], now: datetime) -> datetime:
        seconds = config.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise NodeError(
                f"seconds must be a number >= 0, got {seconds!r}",
                kind="invalid_config",
                field="seconds",
            )
        return now + timedelta(seconds=float(seconds))


NODE = NodeType(SPEC, Delay())
