"""``trigger.schedule``: runs start at times of a cron expression, an interval or one date.

Cron has 5 or 6 fields (seconds first), times are in an IANA time zone, with a catch-up
policy for missed fire times (docs/schedules.md). The scheduler follows the workflow's
active version.
"""

from __future__ import annotations

from backend.engine.nodes.base import NodeType, TriggerBehaviour
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
    config_schema={
        "type": "object",
        "properties": {
            "enabled": {"type": "boolean", "default": True, "title": "Enabled"},
            "mode": {
                "type": "string",
                "enum": ["cron", "interval", "once"],
                "x-enum-labels": {
                    "cron": "Cron expression",
                    "interval": "Fixed interval",
                    "once": "Once",
                },
                "default": "cron",
                "title": "Repeat",
            },
            "cron": {
                "type": "string",
                "title": "Cron expression",
                "description": (
                    "5 fields (minute hour day month weekday) or 6 with seconds first, "
                    "e.g. 0 */2 * * *"
                ),
            },
            "interval_seconds": {
                "type": "integer",
                "minimum": 1,
                "title": "Every (seconds)",
            },
            "at": {
                "type": "string",
                "title": "At (local time)",
                "description": "For a one-off run: YYYY-MM-DDTHH:MM[:SS] in the time zone.",
            },
            "timezone": {
                "type": "string",
                "default": "UTC",
                "title": "Time zone",
                "description": "IANA name, e.g. Europe/Berlin",
            },
            "catch_up": {
                "type": "string",
                "enum": ["skip", "once", "all"],
                "x-enum-labels": {"skip": "Skip them", "once": "Run once", "all": "Run each"},
                "default": "skip",
                "title": "Missed fire times",
                "description": (
                    "After downtime: skip them, run once, or run each within the catch-up window."
                ),
            },
            "misfire_grace": {
                "type": "number",
                "minimum": 0,
                "default": 60,
                "title": "On-time tolerance (seconds)",
                "description": "A fire time later than this counts as missed.",
            },
            "catch_up_window": {
                "type": "number",
                "minimum": 0,
                "default": 3600,
                "title": "Catch-up window (seconds)",
            },
        },
    },
)

NODE = NodeType(SPEC, TriggerBehaviour())
