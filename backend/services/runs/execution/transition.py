"""The one transition helper every run change goes through.

A transition is: lock the run, load its state, let the pure engine decide (a *change*:
the engine's edits of the :class:`~backend.engine.model.RunState` plus the attempt it
closes and the one it claims), persist (child runs the engine asked for, the one-statement
write, what a run's end implies), commit, then the work that must follow the commit
(dispatch, announce). :meth:`Transitions.locked` is that sequence; the fast paths
(backend/services/runs/execution/starts.py and steps.py) compute the same change with the same
pure functions and write it in one autocommit statement when no lock is needed.

A :class:`ChangeSet` is the comparable form of a computed change (what would be written
and dispatched), so tests check that the fast and the locked path compute the same one.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from backend.db.run_writes import step_values
from backend.engine import orchestrator
from backend.engine.flow_steps import outputs_wanted
from backend.engine.model import RunState
from backend.engine.nodes import NODE_TYPES
from backend.engine.ports import (
    Clock,
    Dispatcher,
    EventSink,
    FinishedAttempt,
    HeldSteps,
    NewAttempt,
    RunRow,
    RunStore,
    RunTransaction,
    TransactionHook,
)
from backend.engine.states import RunStatus
from backend.services.runs.cancellation import CancelWatch
from backend.services.runs.draining import Drain
from backend.services.runs.execution.eager import EagerRuns
from designer_schema.graph import WorkflowGraph

if TYPE_CHECKING:
    from backend.services.runs.execution.followups import Followups


AuditHook = TransactionHook
"""Adds the audit row of a run request (``hook(session, run id)``: the run started or
changed) inside the transaction that makes the change; built by
:mod:`backend.services.runs.runs`."""


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
    timeout's due time to set; ``result``: what the use case returns to its caller;
    ``write`` False: the decision changed nothing (no write, nothing follows);
    ``revision``: the run's revision after the write (set when persisted)."""

    dispatch: list[str] = field(default_factory=list)
    finish: FinishedAttempt | None = None
    start: NewAttempt | None = None
    deadline_at: datetime | None = None
    result: Any = None
    write: bool = True
    revision: int | None = None


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
class Locked:
    """A run inside a locked transition: its row, state and graph, the transaction,
    and the instant the transition happens."""

    tx: RunTransaction
    row: RunRow
    state: RunState
    graph: WorkflowGraph
    now: datetime


Decide = Callable[[Locked], Awaitable[Change | None]]
"""A transition's decision: edits ``Locked.state`` through the pure engine and returns
the :class:`Change` (``None``: nothing to do, nothing written or dispatched)."""


def has_calls(graph: WorkflowGraph) -> bool:
    """True when ``graph`` has a Sub-workflow or For-each step (its runs may have children)."""
    return any(orchestrator.behaviour_kind(step) == "call" for step in graph.steps)


def needs_lock(state: RunState) -> bool:
    """True when a computed change needs more than the one fenced statement: child runs
    to create or cancel, or the run ending (slot freed, error workflow, parent woken)."""
    return bool(state.child_requests or state.child_cancels or state.status.terminal)


def ends_unlocked(state: RunState, row: RunRow | None) -> bool:
    """True when a computed change ends the run in a way the one fenced statement can
    write: ``succeeded`` (no error workflow to start in the same transaction), no child
    runs to create or cancel, and the run's ``row`` known (its slot is freed and its
    parent woken after the commit: ``Followups.after_unlocked_end``)."""
    return (
        state.status == RunStatus.SUCCEEDED
        and not state.child_requests
        and not state.child_cancels
        and row is not None
    )


def parent_to_wake(row: RunRow, state: RunState) -> str | None:
    """The parent run to advance after the commit: ``row``'s parent once the run ended."""
    if row.parent_run_id is not None and state.status.terminal:
        return str(row.parent_run_id)
    return None


class NeedsLock(Exception):
    """A decision taken on an unlocked read asked for the run's transaction: it is
    taken again under the lock."""


class _NoTransaction:
    """The transaction handed to a decision taken on an unlocked read: any use of it
    raises :class:`NeedsLock` (the decision is then taken again by
    :meth:`Transitions.locked`)."""

    def __getattr__(self, name: str) -> Any:
        raise NeedsLock(name)


async def run_audit(tx: RunTransaction, audit: AuditHook | None, run_id: uuid.UUID) -> None:
    """Add the audit row of a run request in ``tx`` (nothing without ``audit``)."""
    if audit is not None:
        await tx.within(lambda handle: audit(handle, run_id))


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


class Transitions:
    """Runs transitions: :meth:`locked` for one run, :meth:`persist` inside a caller's
    transaction (admission starts several runs in one)."""

    def __init__(self, env: Env, followups: Followups) -> None:
        self.env = env
        self.followups = followups

    async def locked(
        self, run_id: uuid.UUID, decide: Decide, *, held: HeldSteps | None = None
    ) -> Change | None:
        """Lock run ``run_id``, load it, ``decide``, persist, commit, then follow up.

        Returns the change (``None`` when ``decide`` returned ``None``).
        Raises :class:`RunNotFound`, whatever ``decide`` raises (nothing is written then)
        and :class:`~backend.engine.ports.StaleAttempt` when the change closes an attempt
        whose token no longer holds (nothing written). The transition's time is read once
        the run is locked and read: a wait for the lock, or a child ending while the run
        is read, never dates the change before what it saw (a parent's end before its
        last child's)."""
        async with self.env.store.transaction() as tx:
            row = await tx.lock(run_id)
            if row is None:
                raise RunNotFound(f"run {run_id} not found")
            graph = await tx.graph(row.version_id)
            calls = has_calls(graph)
            outputs = functools.partial(outputs_wanted, graph, nodes=NODE_TYPES) if calls else None
            state = await tx.load(row, children=calls, held=held, outputs=outputs)
            now = self.env.clock.now()
            change = await decide(Locked(tx, row, state, graph, now))
            if change is None or not change.write:
                return change
            followup = await self.persist(tx, row, state, graph, change, now)
        await self.followups.after_commit(str(run_id), followup, state)
        return change

    async def optimistic(self, run_id: uuid.UUID, decide: Decide) -> Change | None:
        """:meth:`locked` without the lock when it can: the SAME ``decide`` on the run
        read without a lock, its change written by one autocommit statement fenced by
        the revision read (no BEGIN/COMMIT, no ORM). Falls back to :meth:`locked` (which
        decides again on the state it loads) when the run's graph has call steps, the
        decision uses the transaction, the change needs more than that statement
        (:func:`needs_lock`, a run deadline, an attempt to close), writes nothing (the
        locked path then skips the write and the notice) or the run moved since the read.

        Same returns and errors as :meth:`locked`."""
        now = self.env.clock.now()
        read = await self.env.store.read_unlocked(run_id)
        if read is None:
            raise RunNotFound(f"run {run_id} not found")
        row, state = read
        graph = await self.env.store.graph(row.version_id)
        if has_calls(graph):
            return await self.locked(run_id, decide)
        try:
            change = await decide(
                Locked(cast(RunTransaction, _NoTransaction()), row, state, graph, now)
            )
        except NeedsLock:
            return await self.locked(run_id, decide)
        if change is None or not change.write:
            return change
        nothing = not (state.changed or state.events or change.start)
        if nothing or needs_lock(state) or change.deadline_at or change.finish:
            return await self.locked(run_id, decide)
        written = await self.env.store.write_unlocked(
            run_id, state, finish=None, start=change.start, expected_revision=row.revision
        )
        if written.revision is None:
            return await self.locked(run_id, decide)
        change.revision = written.revision
        followup = Followup(dispatch=dispatch_entries(state, change.dispatch, now))
        await self.followups.after_commit(str(run_id), followup, state)
        return change

    async def persist(
        self,
        tx: RunTransaction,
        row: RunRow,
        state: RunState,
        graph: WorkflowGraph,
        change: Change,
        now: datetime,
    ) -> Followup:
        """Write ``change`` in ``tx`` (the run locked): create the child runs the engine
        asked for (in this transaction, so a waiting step never lacks its child), save
        the state with the attempt closed/claimed, apply what the run's end implies, and
        say what follows the commit."""
        followup = Followup()
        dispatch = list(change.dispatch)
        while state.child_requests:
            await self.followups.create_children(tx, row, state, followup)
            dispatch += orchestrator.advance(graph, state, now)
        followup.cancel, state.child_cancels = state.child_cancels, []
        ended_now = state.status.terminal and not RunStatus(row.status).terminal
        written = await tx.save(
            row,
            state,
            finish=change.finish,
            start=change.start,
            deadline_at=change.deadline_at,
        )
        change.revision = written.revision
        followup.notify = written.revision != row.revision
        if ended_now:
            await self.followups.on_run_ended(tx, written, state, followup)
        followup.dispatch = dispatch_entries(state, dispatch, now)
        followup.wake_parent = parent_to_wake(row, state)
        return followup
