"""The trigger page's state and line for a listener: failing while its last error is
newer than its last event, listening once events come in after it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.db.models import TriggerSubscription
from backend.services.triggers.events.status import _line

NOW = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def _listener(event_ago: float | None, error_ago: float | None) -> TriggerSubscription:
    return TriggerSubscription(
        kind="broker",
        enabled=True,
        version_number=1,
        lease_owner="events-1",
        lease_until=NOW + timedelta(seconds=30),
        last_event_at=NOW - timedelta(seconds=event_ago) if event_ago is not None else None,
        last_error="the connection to Redis ended: refused" if error_ago is not None else None,
        last_error_at=NOW - timedelta(seconds=error_ago) if error_ago is not None else None,
    )


def test_a_listener_whose_error_is_newer_than_its_last_event_is_failing() -> None:
    state, line = _line(_listener(event_ago=600, error_ago=5), NOW)
    assert state == "failing"
    assert line.startswith("failing (reconnecting)") and "listening" not in line
    assert "the connection to Redis ended: refused" in line
    state, line = _line(_listener(event_ago=None, error_ago=5), NOW)
    assert state == "failing" and "listening" not in line


def test_a_listener_with_events_after_its_error_is_listening() -> None:
    state, line = _line(_listener(event_ago=5, error_ago=600), NOW)
    assert state == "ok" and line.startswith("listening")
    state, line = _line(_listener(event_ago=5, error_ago=None), NOW)
    assert (state, line.split(" · ")[0]) == ("ok", "listening")
