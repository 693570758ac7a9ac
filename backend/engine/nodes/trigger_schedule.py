"""``trigger.schedule``: runs start at times of a cron expression, an interval or one date.

Cron has 5 or 6 fields (seconds first), times are in an IANA time zone, with a catch-up
policy for missed fire times (docs/schedules.md). The scheduler follows the workflow's
active version.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from backend.engine.nodes.base import NodeType, TriggerBehaviour
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec

OUTPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "schedule_id": {"type": "string"},
        "scheduled_at": {"type": "string", "format": "date-time"},
        "fired_at": {"type": "string", "format": "date-time"},
        "timezone": {"type": "string"},
        "local_time": {"type": "string"},
    },
}
"""The run input of a scheduled run."""


class ScheduleConfig(msgspec.Struct, kw_only=True, frozen=True):
    """A schedule as stored: ``mode`` picks which of ``cron``, ``interval_seconds`` (>= 1)
    and ``at`` (a local date-time) applies; ``timezone`` an IANA name; ``catch_up``,
    ``misfire_grace`` and ``catch_up_window`` in seconds (>= 0). What one field cannot say
    alone (a valid cron expression or time zone, the field the mode needs) is checked by
    :func:`backend.triggers.schedule_rules.parse_spec`."""

    enabled: Annotated[bool, msgspec.Meta(title="Enabled")] = True
    mode: Annotated[
        Literal["cron", "interval", "once"],
        msgspec.Meta(
            title="Repeat",
            extra_json_schema={
                "x-enum-labels": {
                    "cron": "Cron expression",
                    "interval": "Fixed interval",
                    "once": "Once",
                }
            },
        ),
    ] = "cron"
    cron: (
        Annotated[
            str,
            msgspec.Meta(
                title="Cron expression",
                description=(
                    "5 fields (minute hour day month weekday) or 6 with seconds first, "
                    "e.g. 0 */2 * * *"
                ),
            ),
        ]
        | None
    ) = None
    interval_seconds: Annotated[int, msgspec.Meta(ge=1, title="Every (seconds)")] | None = None
    at: (
        Annotated[
            str,
            msgspec.Meta(
                title="At (local time)",
                description="For a one-off run: YYYY-MM-DDTHH:MM[:SS] in the time zone.",
            ),
        ]
        | None
    ) = None
    timezone: Annotated[
        str, msgspec.Meta(title="Time zone", description="IANA name, e.g. Europe/Berlin")
    ] = "UTC"
    catch_up: Annotated[
        Literal["skip", "once", "all"],
        msgspec.Meta(
            title="Missed fire times",
            description=(
                "After downtime: skip them, run once, or run each within the catch-up window."
            ),
            extra_json_schema={
                "x-enum-labels": {"skip": "Skip them", "once": "Run once", "all": "Run each"}
            },
        ),
    ] = "skip"
    misfire_grace: Annotated[
        float,
        msgspec.Meta(
            ge=0,
            title="On-time tolerance (seconds)",
            description="A fire time later than this counts as missed.",
        ),
    ] = 60
    catch_up_window: Annotated[float, msgspec.Meta(ge=0, title="Catch-up window (seconds)")] = 3600


SPEC = NodeTypeSpec(
    type="trigger.schedule",
    label="Schedule",
    kind="trigger",
    category="Triggers",
    icon="calendar-clock",
    description=(
        "Starts a run at times given by a cron expression, a fixed interval or one date, in "
        "a time zone. The run input is {schedule_id, scheduled_at, fired_at, timezone, "
        "local_time}."
    ),
    inputs=(),
    outputs=("out",),
    output_schema=OUTPUT_SCHEMA,
    config_schema=config_schema(ScheduleConfig),
)


class Schedule(TriggerBehaviour):
    """Its step completes with the scheduler's run input; its config is a
    :class:`ScheduleConfig`."""

    config_type = ScheduleConfig


NODE = NodeType(SPEC, Schedule())
