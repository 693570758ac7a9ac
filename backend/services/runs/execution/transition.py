"""What a run change is: the types every decision and the run writer share.

A *decision* (start, claim, complete, retry, fail, pause, resume, cancel, time out,
advance) is a pure function of a run (:class:`RunView`: its row, state, graph and the
instant) that edits the run's :class:`~backend.engine.model.RunState` through the pure
engine and returns one :class:`Change` (the attempt it closes and claims, the steps to
dispatch, the running attempts to cancel, the audit row to add). The run writer
(backend/services/runs/execution/writer.py) applies the change set and alone decides how:
one statement fenced by the run's revision, or under the run lock.

A :class:`ChangeSet` is the comparable form of a computed change (what would be written
and dispatched).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from backend.db.run_writes import step_values
from backend.engine import orchestrator
from backend.engine.model import RunState
from backend.engine.ports import (
    AuditHook,
    Clock,
    Dispatcher,
    EventSink,
    FinishedAttempt,
    NewAttempt,
    RunRow,
    RunStore,
)
from backend.services.runs.cancellation import CancelWatch
from backend.services.runs.draining import Drain
from backend.services.runs.execution.eager import EagerRuns
from designer_schema.graph import WorkflowGraph

__all__ = ["AuditHook", "Change", "ChangeSet", "Env", "Followup", "RunView"]


class RunNotFound(LookupError):
    """No run with that id."""


class RunNotActive(ValueError):
    """The run is not in a state that allows the request (e.g. resume a running run)."""


@dataclass
class Env:
    """What every execution use case shares: the ports and the process's settings.

    ``worker`` (``host:pid``) is recorded on attempts; ``lease_seconds`` is the attempt
    lease; ``base_url`` builds run links handed to error workflows. ``clock`` may be
    replaced (tests drive a fake one) and is read at each use. ``cancel_watch`` holds
    the attempts running in this process, stopped at once when their run ends
    (backend/services/runs/cancellation.py); ``drain`` is the process's graceful-shutdown
    state (backend/services/runs/draining.py); ``eager`` the budget of runs this process
    executes itself (backend/services/runs/execution/eager.py; none unless set)."""

    store: RunStore
    dispatcher: Dispatcher
    events: EventSink
    clock: Clock
    worker: str
    lease_seconds: float
    base_url: str
    cancel_watch: CancelWatch = field(default_factory=CancelWatch)
    drain: Drain = field(default_factory=Drain)
    eager: EagerRuns = field(init=False)

    def __post_init__(self) -> None:
        self.eager = EagerRuns(self.drain)


@dataclass
class Change:
    """What a decision computed besides its edits of the run state.

    ``dispatch``: step ids to dispatch after commit; ``finish``: the attempt to close
    (fenced by its token); ``start``: the attempt claimed; ``deadline_at``: the run
    timeout's due time to set; ``cancel_attempts``: the run ended and its running attempts
    are cancelled (and stopped at once after the commit); ``close``: an attempt to close
    if still open without changing the run (a late completion; ``closed`` says whether it
    was); ``audit``: the audit row of the request, committed with the change;
    ``advance``: a worker continues the run after commit (inline steps a start left
    ready when its budget ran out); ``result``: what the use case returns to its caller;
    ``write`` False: the decision changed nothing (no write, nothing follows);
    ``revision``: the run's revision after the write and ``form`` how the writer wrote
    it (``"statement"``: one statement fenced by the revision; ``"locked"``: under the
    run lock), both set when persisted."""

    dispatch: list[str] = field(default_factory=list)
    finish: FinishedAttempt | None = None
    start: NewAttempt | None = None
    deadline_at: datetime | None = None
    cancel_attempts: bool = False
    close: FinishedAttempt | None = None
    closed: bool | None = None
    audit: AuditHook | None = None
    advance: bool = False
    result: Any = None
    write: bool = True
    revision: int | None = None
    form: str | None = None


@dataclass
class Followup:
    """What to do after a run transaction commits.

    ``dispatch``: ``(step id, delay seconds or None)`` to enqueue; ``advance``: runs to
    advance (queued child runs, the error workflow's run, the oldest queued run of a
    workflow whose run just ended); ``cancel``: child runs to cancel; ``wake_parent``:
    the parent run to advance because this child run ended; ``notify``: announce the
    change on the run's channel; ``state``: the run as committed, for callers that have
    no other way to hand it on (a start that ended or answered the run: its notice then
    carries the answer as the steps built it, see :meth:`Followups.announce`).
    """

    dispatch: list[tuple[str, float | None]] = field(default_factory=list)
    advance: list[str] = field(default_factory=list)
    cancel: list[str] = field(default_factory=list)
    wake_parent: str | None = None
    notify: bool = True
    state: RunState | None = None


@dataclass
class ChangeSet:
    """The comparable content of a computed change: the step records and run fields the
    write stores, the events it appends, the attempt it closes and claims (without the
    random fencing token) and the steps dispatched after commit."""

    steps: dict[str, dict[str, Any]]
    run: dict[str, Any]
    events: list[tuple[str, str | None, dict[str, Any]]]
    finish: dict[str, Any] | None
    start: dict[str, Any] | None
    dispatch: list[str]

    @classmethod
    def of(cls, state: RunState, change: Change) -> ChangeSet:
        """Read the change set of ``state`` (before it is written) and ``change``."""
        start = None
        if change.start is not None:
            start = {
                k: v for k, v in vars(change.start).items() if k not in ("fencing_token", "id")
            }
        finish = None
        if change.finish is not None:
            finish = {k: v for k, v in vars(change.finish).items() if k != "fencing_token"}
        return cls(
            steps={sid: step_values(state.steps[sid]) for sid in sorted(state.changed)},
            run={
                "status": state.status.value,
                "output": state.output,
                "error": state.error,
                "response": state.response,
                "started_at": state.started_at,
                "finished_at": state.finished_at,
                "deadline_at": change.deadline_at,
            },
            events=[(e.kind, e.step_id, e.data) for e in state.events],
            finish=finish,
            start=start,
            dispatch=list(dict.fromkeys(change.dispatch)),
        )


@dataclass
class RunView:
    """The run a decision is taken on: its row, state and graph, and the instant the
    change happens (read under the run lock, read without it, or as this process last
    wrote it: the writer knows which; the decision does not)."""

    row: RunRow
    state: RunState
    graph: WorkflowGraph
    now: datetime


Decide = Callable[[RunView], Change | None]
"""A decision: edits ``RunView.state`` through the pure engine and returns the
:class:`Change` (``None``: nothing to do, nothing written or dispatched). No I/O."""


def has_calls(graph: WorkflowGraph) -> bool:
    """True when ``graph`` has a Sub-workflow or For-each step (its runs may have children)."""
    return any(orchestrator.behaviour_kind(step) == "call" for step in graph.steps)


def parent_to_wake(row: RunRow, state: RunState) -> str | None:
    """The parent run to advance after the commit: ``row``'s parent once the run ended."""
    if row.parent_run_id is not None and state.status.terminal:
        return str(row.parent_run_id)
    return None


def dispatch_entries(
    state: RunState, dispatch: list[str], now: datetime
) -> list[tuple[str, float | None]]:
    """``(step id, delay seconds or None)`` for each step to dispatch, once each (a
    timer's or retry's delay runs to the step's ``not_before``)."""
    entries = []
    for step_id in dict.fromkeys(dispatch):
        rec = state.steps.get(step_id)
        delay = None
        if rec is not None and rec.not_before is not None and rec.not_before > now:
            delay = (rec.not_before - now).total_seconds()
        entries.append((step_id, delay))
    return entries
