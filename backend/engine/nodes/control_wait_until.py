"""``control.wait_until``: waits until ``until``, an ISO 8601 timestamp
(``2026-01-01T09:00:00Z``; without an offset it is UTC), on a durable timer (see
:mod:`backend.engine.nodes.control_delay`). A time in the past fires at once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import msgspec

from backend.engine.nodes.base import SAME_AS_INPUT, NodeError, NodeType, TimerBehaviour
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec


class WaitUntilConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``until``: the moment to wait for, ISO 8601 text (may be an expression)."""

    until: Annotated[str, msgspec.Meta(title="Until (ISO 8601)")]


SPEC = NodeTypeSpec(
    type="control.wait_until",
    label="Wait Until",
    kind="control",
    category="Flow",
    icon="alarm-clock",
    description="Waits until a timestamp (ISO 8601, UTC without offset), then passes the input on.",
    config_schema=config_schema(WaitUntilConfig),
    expression_fields=("until",),
    output_schema=SAME_AS_INPUT,
)


class WaitUntil(TimerBehaviour):
    """Due at ``until``."""

    config_type = WaitUntilConfig

    def due(self, config: WaitUntilConfig, now: datetime) -> datetime:
        until = config.until
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
