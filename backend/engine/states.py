"""Run and step states and the transitions allowed between them.

One module holds every state machine of the runtime (SpiffWorkflow's Task states, without
its missing type hints): specs live in ``designer_schema.graph``; *state* lives here.

Run: ``queued -> running -> (succeeded | failed | cancelled | timed_out)``; ``running <->
waiting`` while only durable timers or child runs are pending; ``running/waiting <->
paused`` (a paused run starts nothing new; steps already running finish and are recorded).

Step run: ``pending -> ready -> running -> (succeeded | failed)``, ``pending -> skipped``
(dead path: no incoming branch was taken), ``running -> ready`` (retry scheduled),
``ready/running -> cancelled``, ``cancelled -> succeeded`` (the attempt that was running
when the run ended completed: its call happened, so the step shows it with its output;
:func:`backend.engine.run_end.succeed_after_end`).

Attempt: ``running -> (succeeded | failed | expired | cancelled)``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

import msgspec


class InvalidTransition(Exception):
    """Raised when code asks for a state change the state machine forbids."""


class RunStatus(StrEnum):
    """Lifecycle of one run."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"

    @property
    def terminal(self) -> bool:
        """True for states a run never leaves."""
        return self in _RUN_TERMINAL


class StepStatus(StrEnum):
    """Lifecycle of one step in one run."""

    PENDING = "pending"
    READY = "ready"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """True for the states a step ends in: it never leaves them, except a step
        cancelled by its run's end whose running attempt then succeeds (``cancelled ->
        succeeded``)."""
        return self in _STEP_TERMINAL


class AttemptStatus(StrEnum):
    """Lifecycle of one attempt of a step."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    RELEASED = "released"
    """Handed back by a worker shutting down; the step runs again at once elsewhere."""


_RUN_TERMINAL = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT}
)
_STEP_TERMINAL = frozenset(
    {StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.CANCELLED}
)

RUN_TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.WAITING,
            RunStatus.PAUSED,
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
            RunStatus.TIMED_OUT,
        }
    ),
    RunStatus.WAITING: frozenset(
        {
            RunStatus.RUNNING,
            RunStatus.PAUSED,
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
            RunStatus.TIMED_OUT,
        }
    ),
    RunStatus.PAUSED: frozenset(
        {RunStatus.RUNNING, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT}
    ),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
    RunStatus.TIMED_OUT: frozenset(),
}

STEP_TRANSITIONS: dict[StepStatus, frozenset[StepStatus]] = {
    StepStatus.PENDING: frozenset(
        {StepStatus.READY, StepStatus.SKIPPED, StepStatus.CANCELLED, StepStatus.SUCCEEDED}
    ),
    StepStatus.READY: frozenset(
        {StepStatus.RUNNING, StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.CANCELLED}
    ),
    StepStatus.RUNNING: frozenset(
        {StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.READY, StepStatus.CANCELLED}
    ),
    StepStatus.SUCCEEDED: frozenset(),
    StepStatus.FAILED: frozenset(),
    StepStatus.SKIPPED: frozenset(),
    # only the attempt that was running when the run ended (run_end.succeed_after_end)
    StepStatus.CANCELLED: frozenset({StepStatus.SUCCEEDED}),
}


def check_run_transition(current: RunStatus, new: RunStatus) -> None:
    """Raise :class:`InvalidTransition` unless ``current -> new`` is allowed (or a no-op)."""
    if current != new and new not in RUN_TRANSITIONS[current]:
        raise InvalidTransition(f"run cannot go from {current} to {new}")


def check_step_transition(current: StepStatus, new: StepStatus) -> None:
    """Raise :class:`InvalidTransition` unless ``current -> new`` is allowed (or a no-op)."""
    if current != new and new not in STEP_TRANSITIONS[current]:
        raise InvalidTransition(f"step cannot go from {current} to {new}")


RunAction = Literal["pause", "resume", "cancel", "rerun_failed_step", "rerun_start"]
"""What a user may do with a run: run control (``POST /api/runs/{id}/pause|resume|cancel``)
and re-runs (``POST /api/runs/{id}/rerun {"from": "failed_step" | "start"}``)."""

_LABELS: dict[RunStatus, str] = {
    RunStatus.QUEUED: "Queued",
    RunStatus.RUNNING: "Running",
    RunStatus.WAITING: "Waiting",
    RunStatus.PAUSED: "Paused",
    RunStatus.SUCCEEDED: "Succeeded",
    RunStatus.FAILED: "Failed",
    RunStatus.CANCELLED: "Cancelled",
    RunStatus.TIMED_OUT: "Timed out",
}


class RunStatusInfo(msgspec.Struct, frozen=True):
    """A run status as pages and scripts show it, derived from :class:`RunStatus` and
    :data:`RUN_TRANSITIONS` (the one source of truth): ``value`` (``"timed_out"``),
    ``label`` (``"Timed out"``), ``terminal``, and the ``actions`` a user may take on a run
    in that status (:data:`RunAction`)."""

    value: str
    label: str
    terminal: bool
    actions: tuple[RunAction, ...]


def run_status_info(status: RunStatus | str) -> RunStatusInfo:
    """The :class:`RunStatusInfo` of ``status``; raises ``ValueError`` for an unknown one.

    Pause needs a transition to ``paused``, cancel one to ``cancelled``; only a paused run
    resumes; ended runs re-run from the start, and those that did not succeed also from
    the step that stopped them.
    """
    status = RunStatus(status)
    allowed = RUN_TRANSITIONS[status]
    actions: list[RunAction] = []
    if RunStatus.PAUSED in allowed:
        actions.append("pause")
    if status == RunStatus.PAUSED:
        actions.append("resume")
    if RunStatus.CANCELLED in allowed:
        actions.append("cancel")
    if status.terminal and status != RunStatus.SUCCEEDED:
        actions.append("rerun_failed_step")
    if status.terminal:
        actions.append("rerun_start")
    return RunStatusInfo(status.value, _LABELS[status], status.terminal, tuple(actions))


RUN_STATUSES: tuple[RunStatusInfo, ...] = tuple(run_status_info(s) for s in RunStatus)
"""Every run status in lifecycle order, as :func:`run_status_info` describes it."""
