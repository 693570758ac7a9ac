"""Durable timers: Delay and Wait Until.

A timer step holds no worker: when it becomes ready the engine computes its due time and
leaves it ``ready`` with ``not_before`` = due (a row in PostgreSQL). The dispatcher gets a
deferred job for the due time (prompt), and the sweeper re-dispatches due ready steps
(certain). Firing a timer (:func:`backend.engine.orchestrator.fire_timer`) completes the
step with its input as output. While only timers and child runs are pending the run is
``waiting``.

- ``control.delay``: ``seconds`` (number >= 0, may be an expression).
- ``control.wait_until``: ``until``, an ISO 8601 timestamp (``2026-01-01T09:00:00Z``;
  without an offset it is UTC). A time in the past fires at once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from designer_schema.catalog import NodeTypeSpec

DELAY = "control.delay"
WAIT_UNTIL = "control.wait_until"
TIMER_TYPES = frozenset({DELAY, WAIT_UNTIL})

CONTROL_DELAY = NodeTypeSpec(
    type=DELAY,
    label="Delay",
    kind="control",
    category="Flow",
    icon="clock",
    description="Waits a number of seconds on a durable timer, then passes the input on.",
    config_schema={
        "type": "object",
        "properties": {"seconds": {"type": "number", "title": "Seconds", "minimum": 0}},
        "required": ["seconds"],
    },
    expression_fields=("seconds",),
)

CONTROL_WAIT_UNTIL = NodeTypeSpec(
    type=WAIT_UNTIL,
    label="Wait Until",
    kind="control",
    category="Flow",
    icon="clock",
    description="Waits until a timestamp (ISO 8601, UTC without offset), then passes the input on.",
    config_schema={
        "type": "object",
        "properties": {"until": {"type": "string", "title": "Until (ISO 8601)"}},
        "required": ["until"],
    },
    expression_fields=("until",),
)


class TimerError(ValueError):
    """A timer's config does not give a usable time; ``field`` names the config field."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def due_time(node_type: str, config: dict[str, Any], now: datetime) -> datetime:
    """When a timer step of ``node_type`` with resolved ``config`` fires (UTC).

    Raises :class:`TimerError` for a negative or non-numeric ``seconds`` or an unparsable
    ``until``.
    """
    if node_type == DELAY:
        seconds = config.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise TimerError(f"seconds must be a number >= 0, got {seconds!r}", "seconds")
        return now + timedelta(seconds=float(seconds))
    until = config.get("until")
    if not isinstance(until, str):
        raise TimerError(f"until must be an ISO 8601 timestamp, got {until!r}", "until")
    try:
        moment = datetime.fromisoformat(until.replace("Z", "+00:00"))
    except ValueError as exc:
        raise TimerError(f"until is not an ISO 8601 timestamp: {until!r}", "until") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
