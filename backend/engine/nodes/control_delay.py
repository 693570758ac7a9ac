"""``control.delay``: waits ``seconds`` (a number >= 0, may be an expression) on a durable
timer, then passes its input on.

A timer step holds no worker: when it becomes ready the engine stores its due time as the
step's ``not_before`` (a row in PostgreSQL); the dispatcher gets a deferred job for that
time (prompt) and the sweeper re-dispatches due ready steps (certain). Firing the timer
(:func:`backend.engine.orchestrator.fire_timer`) completes the step with its input.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

import msgspec

from backend.engine.nodes.base import SAME_AS_INPUT, NodeType, TimerBehaviour
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec


class DelayConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``seconds``: how long to wait (a number >= 0; may be an expression)."""

    seconds: Annotated[
        float, msgspec.Meta(ge=0, title="Wait", extra_json_schema={"x-duration": True})
    ]


SPEC = NodeTypeSpec(
    type="control.delay",
    label="Delay",
    kind="control",
    category="Flow",
    icon="timer",
    description="Waits a number of seconds on a durable timer, then passes the input on.",
    config_schema=config_schema(DelayConfig),
    expression_fields=("seconds",),
    output_schema=SAME_AS_INPUT,
)


class Delay(TimerBehaviour):
    """Due ``seconds`` after the step became ready."""

    config_type = DelayConfig

    def due(self, config: DelayConfig, now: datetime) -> datetime:
        return now + timedelta(seconds=config.seconds)


NODE = NodeType(SPEC, Delay())
