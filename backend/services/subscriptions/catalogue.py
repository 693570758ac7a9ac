"""The event catalogue of outgoing subscriptions: which outbox rows become which event
type, and each event's payload (docs/api.md, "Event catalogue").

Payloads follow the Standard Webhooks payload structure (``type``, ``timestamp``,
``data``; https://github.com/standard-webhooks/standard-webhooks, spec/standard-webhooks.md,
"Payload structure"). Timestamps are RFC 3339 UTC with ``Z``; ``url`` members are absolute
(from ``RAILYARD_BASE_URL``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, get_args

import msgspec

RUN_EVENTS = ("run.started", "run.succeeded", "run.failed", "run.timed_out", "run.cancelled")
"""Event types made from the ``events`` outbox (the engine's ``kind`` of the same name)."""

WORKFLOW_EVENTS: dict[str, str] = {
    "workflow.publish": "workflow.published",
    "workflow.archive": "workflow.archived",
}
"""Audit actions (the ``audit_log`` outbox) -> the event type they become."""

EventType = Literal[
    "run.started",
    "run.succeeded",
    "run.failed",
    "run.timed_out",
    "run.cancelled",
    "workflow.published",
    "workflow.archived",
]
"""An event type a subscription may name (the API documents them as an enum)."""

EVENT_TYPES: tuple[str, ...] = get_args(EventType)
"""Every event type a subscription may name, in catalogue order."""
assert EVENT_TYPES == (*RUN_EVENTS, *WORKFLOW_EVENTS.values())

RUN_STATUS = {
    "run.started": "running",
    "run.succeeded": "succeeded",
    "run.failed": "failed",
    "run.timed_out": "timed_out",
    "run.cancelled": "cancelled",
}


def rfc3339(at: datetime) -> str:
    """``at`` as RFC 3339 UTC with ``Z`` and millisecond precision."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_payload(
    event_type: str,
    at: datetime,
    run: dict[str, Any],
    event_data: dict[str, Any],
    base_url: str,
) -> bytes:
    """The JSON body of a run event. ``run``: ``id``, ``workflow_id``, ``version_number``,
    ``trigger``; ``event_data``: the outbox row's ``data`` (``error`` of ``run.failed``,
    ``reason`` of a cancel or timeout)."""
    base = base_url.rstrip("/")
    data: dict[str, Any] = {
        "run_id": str(run["id"]),
        "workflow_id": str(run["workflow_id"]),
        "version": run["version_number"],
        "status": RUN_STATUS[event_type],
        "trigger": run["trigger"],
        "url": f"{base}/runs/{run['id']}",
        "api_url": f"{base}/api/v1/runs/{run['id']}",
    }
    if event_type == "run.failed" and isinstance(event_data.get("error"), dict):
        data["error"] = event_data["error"]
    elif event_type in ("run.timed_out", "run.cancelled", "run.failed") and event_data.get(
        "reason"
    ):
        data["error"] = {"message": str(event_data["reason"])}
    return _encode(event_type, at, data)


def workflow_payload(
    event_type: str, at: datetime, workflow: dict[str, Any], details: dict[str, Any], base_url: str
) -> bytes:
    """The JSON body of a workflow event. ``workflow``: ``id``, ``name``; ``details``: the
    audit row's details (``version`` of a publish)."""
    base = base_url.rstrip("/")
    data: dict[str, Any] = {
        "workflow_id": str(workflow["id"]),
        "name": workflow["name"],
        "url": f"{base}/workflows/{workflow['id']}/designer",
        "api_url": f"{base}/api/v1/workflows/{workflow['id']}",
    }
    if event_type == "workflow.published":
        data["version"] = details.get("version")
    return _encode(event_type, at, data)


def _encode(event_type: str, at: datetime, data: dict[str, Any]) -> bytes:
    return msgspec.json.encode({"type": event_type, "timestamp": rfc3339(at), "data": data})
