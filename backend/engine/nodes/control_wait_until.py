"""``control.wait_until``: waits until ``until``, an ISO 8601 timestamp
(``2026-01-01T09:00:00Z``; without an offset it is UTC), on a durable timer (see
:mod:`backend.engine.nodes.control_delay`). A time in the past fires at once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from backend.engine.nodes.base import SAME_AS_INPUT, NodeError, NodeType, TimerBehaviour
from designer_schema.catalog import NodeTypeSpec

SPEC = NodeTypeSpec(
    type="control.wait_until",
    label="Wait Until",
    kind="control",
    category="Flow",
    icon="alarm-clock",
    description="Waits until a timestamp (ISO 8601, UTC without offset), then passes the input on.",
    config_schema={
        "type": "object",
        "properties": {"until": {"type": "string", "title": "Until (ISO 8601)"}},
        "required": ["until"],
    },
    expression_fields=("until",),
    output_schema=SAME_AS_INPUT,
)


class WaitUntil(TimerBehaviour):
    """Due at ``until``."""

    def due(self, config: dict[str, Any], now: datetime) -> datetime:
        until = config.get("until")
        if not isinstance(until, str):
            raise NodeError(
                f"until must be an ISO 8601 timestamp, got {until!r}",
                kind="invalid_config",
                field="until",
            )
        try:
            moment = datetime.fromisoformat(until.replace("Z", "+00:00"))
        except ValueError as exc:
            raise NodeError(
                f"until is not an ISO 8601 timestamp: {until!r}",
                kind="invalid_config",
                field="until",
            ) from exc
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


NODE = NodeType(SPEC, WaitUntil())
