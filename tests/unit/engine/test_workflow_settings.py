"""Run-control settings: one typed definition of names, types and bounds."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from backend.engine.workflow_settings import (
    MAX_RUN_TIMEOUT_SECONDS,
    SettingError,
    WorkflowSettings,
)

WF = uuid.UUID("00000000-0000-0000-0000-000000000001")
OTHER = "00000000-0000-0000-0000-000000000002"


def test_stored_settings_round_trip_and_unknown_keys_are_ignored() -> None:
    raw = {"max_concurrent_runs": 3, "run_timeout_seconds": 2.5, "legacy": True}
    settings = WorkflowSettings.from_stored(raw)
    assert settings == WorkflowSettings(run_timeout_seconds=2.5, max_concurrent_runs=3)
    assert settings.stored() == {"run_timeout_seconds": 2.5, "max_concurrent_runs": 3}
    assert WorkflowSettings.from_stored(None) == WorkflowSettings()
    assert msgspec.json.encode(WorkflowSettings()) == b"{}"  # unset settings are not sent


def test_changes_apply_and_null_clears() -> None:
    settings = WorkflowSettings(max_concurrent_runs=3).changed(
        {"error_workflow_id": OTHER.upper(), "max_concurrent_runs": None}, workflow_id=WF
    )
    assert settings == WorkflowSettings(error_workflow_id=OTHER)


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        ({"colour": "red"}, "colour", "unknown setting 'colour'"),
        ({"error_workflow_id": "nope"}, "error_workflow_id", "must be a workflow id"),
        ({"error_workflow_id": str(WF)}, "error_workflow_id", "its own error workflow"),
        ({"run_timeout_seconds": "5"}, "run_timeout_seconds", "a number of seconds"),
        ({"run_timeout_seconds": 0}, "run_timeout_seconds", "must be > 0"),
        (
            {"run_timeout_seconds": MAX_RUN_TIMEOUT_SECONDS + 1},
            "run_timeout_seconds",
            f"<= {MAX_RUN_TIMEOUT_SECONDS}",
        ),
        ({"max_concurrent_runs": True}, "max_concurrent_runs", "must be an integer"),
        ({"max_concurrent_runs": 0}, "max_concurrent_runs", "between 1 and 10000"),
    ],
)
def test_bad_changes_name_the_setting(changes: dict[str, object], key: str, message: str) -> None:
    with pytest.raises(SettingError, match=message) as caught:
        WorkflowSettings().changed(changes, workflow_id=WF)
    assert caught.value.key == key
