"""A workflow's run-control settings: the one definition of their names, types and bounds.

Stored in ``workflows.settings`` (jsonb), changed with ``PATCH /api/workflows/{id}``
``{"settings": {...}}`` (docs/engine.md, "Run control"):

- ``error_workflow_id``: another workflow, started when a run fails or times out;
- ``run_timeout_seconds``: > 0 and at most 30 days; a run still going after it times out;
- ``max_concurrent_runs``: 1..10000; further runs wait ``queued``, oldest first.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

MAX_RUN_TIMEOUT_SECONDS = 30 * 24 * 3600
MAX_CONCURRENT_RUNS = 10_000


class SettingError(ValueError):
    """A setting change is invalid; ``key`` names the setting."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class WorkflowSettings(msgspec.Struct, frozen=True, omit_defaults=True):
    """Run-control settings of one workflow; ``None`` is "not set" (and is not stored)."""

    error_workflow_id: str | None = None
    run_timeout_seconds: float | None = None
    max_concurrent_runs: int | None = None

    @classmethod
    def from_stored(cls, raw: Any) -> WorkflowSettings:
        """The settings stored as ``raw`` (a jsonb object; ``None`` or ``{}`` = none set).
        Keys this version does not know are ignored."""
        if not isinstance(raw, dict):
            return cls()
        known = {k: raw[k] for k in cls.__struct_fields__ if k in raw}
        return msgspec.convert(known, cls, strict=False)

    def stored(self) -> dict[str, Any]:
        """The jsonb object to store (set settings only)."""
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]

    def changed(self, changes: dict[str, Any], *, workflow_id: uuid.UUID) -> WorkflowSettings:
        """These settings with ``changes`` applied (a ``None`` value clears a setting).

        Raises :class:`SettingError` for an unknown key or a value of the wrong type or out
        of bounds, and for an error workflow that is ``workflow_id`` itself. Whether the
        error workflow exists is the caller's to check.
        """
        values = msgspec.structs.asdict(self)
        for key, value in changes.items():
            if key not in values:
                raise SettingError(f"unknown setting {key!r}", key)
            values[key] = None if value is None else _check(key, value, workflow_id)
        return WorkflowSettings(**values)


def _check(key: str, value: Any, workflow_id: uuid.UUID) -> Any:
    if key == "error_workflow_id":
        try:
            target = uuid.UUID(str(value))
        except ValueError:
            raise SettingError("error_workflow_id must be a workflow id", key) from None
        if target == workflow_id:
            raise SettingError("a workflow cannot be its own error workflow", key)
        return str(target)
    if key == "run_timeout_seconds":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SettingError("run_timeout_seconds must be a number of seconds", key)
        if not 0 < value <= MAX_RUN_TIMEOUT_SECONDS:
            raise SettingError(
                f"run_timeout_seconds must be > 0 and <= {MAX_RUN_TIMEOUT_SECONDS}", key
            )
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingError("max_concurrent_runs must be an integer", key)
    if not 1 <= value <= MAX_CONCURRENT_RUNS:
        raise SettingError(f"max_concurrent_runs must be between 1 and {MAX_CONCURRENT_RUNS}", key)
    return value
