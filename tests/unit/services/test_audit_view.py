"""Pure parts of the audit and settings views: the before/after diff, time filters, URL
masking."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.services.errors import InvalidInput
from backend.services.operations.audit_log import Change, diff, make_filter, parse_time
from backend.services.operations.settings_view import effective_settings, mask_url
from backend.settings import Settings


def test_diff_descends_into_objects_and_treats_missing_as_empty() -> None:
    assert diff({"a": 1, "s": {"x": 1, "y": 2}}, {"a": 1, "s": {"x": 3, "y": 2}}) == [
        Change("s.x", 1, 3)
    ]
    assert diff(None, {"name": "n"}) == [Change("name", None, "n")]
    assert diff({"name": "n"}, None) == [Change("name", "n", None)]
    assert diff([1], [1, 2]) == [Change("", [1], [1, 2])]
    assert diff({"k": 1}, {"k": 1}) == []


def test_time_filters_default_to_utc_and_name_the_bad_field() -> None:
    assert parse_time("2026-06-01T08:00", "since") == datetime(2026, 6, 1, 8, tzinfo=UTC)
    assert parse_time("", "since") is None
    with pytest.raises(InvalidInput) as info:
        make_filter(until="noon")
    assert info.value.field == "until"


def test_settings_view_masks_passwords_and_secrets() -> None:
    assert (
        mask_url("postgresql+asyncpg://app:hunter2@db:5432/ry")
        == "postgresql+asyncpg://app:***@db:5432/ry"
    )
    assert mask_url("redis://localhost:6379/0") == "redis://localhost:6379/0"
    settings = Settings(
        database_url="postgresql://u:pw-123@h/db",
        secret_key="csrf-secret-abc",
        encryption_old_keys=("old-key-1",),
    )
    shown = {s.name: s for s in effective_settings(settings)}
    text = repr(shown)
    assert "pw-123" not in text and "csrf-secret-abc" not in text and "old-key-1" not in text
    assert shown["encryption_key"].value == "not set"
    assert shown["encryption_old_keys"].value == "set (hidden)"
    assert shown["base_url"].variable == "RAILYARD_BASE_URL" and shown["base_url"].default
