"""The run writer: the one place run changes are written.

Every decision (backend/services/runs/execution/decisions.py, step_changes.py, the start's
in starts.py) is a pure function of a run returning one
:class:`~backend.services.runs.execution.transition.Change`. :class:`RunWriter` applies it,
and it alone decides how (:func:`lock_reason`, :func:`start_lock_reason`):

- **One statement, fenced.** A decision taken on a basis that does not hold the run lock
  (the run read without it, :data:`READ`; the run as this process last wrote it,
  :class:`OwnWrite`; a new run, which nobody else can see yet) whose change needs nothing
  but the write is stored by ONE autocommit statement: ``RunStore.write_unlocked``,
  fenced by the run's revision (and the closed attempt's fencing token), or
  ``RunStore.insert_started``, fenced by the workflow settings the start was decided
  from. When the fence does not hold (another write moved the run, the settings
  changed), nothing was written and the change is decided again.
- **Under the run lock.** Otherwise (child runs to create or cancel, a run ending other
  than ``succeeded``, running attempts to cancel, an audit row, a run timeout to set, a
  late completion to close, a graph with call steps, a start under a concurrency limit
  or copying steps) one transaction locks the run, loads it, takes the SAME decision on
  the loaded state and persists it (:meth:`RunWriter.persist`: the child runs, the one
  write, what a run's end implies).

After either commit, :meth:`RunWriter.after_commit` does what follows (dispatch, advance,
cancel child runs, wake the parent, stop the ended run's running attempts, announce).
``fenced=False`` makes every change go under the lock (the tests that compare both forms).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from backend.engine import orchestrator
from backend.engine.flow_steps import outputs_wanted
from backend.engine.model import RunState
from backend.engine.nodes import NODE_TYPES
from backend.engine.ports import (
    HeldSteps,
    NewRun,
    RunRow,
    RunTransaction,
    StaleAttempt,
    WorkflowSettings,
)
from backend.engine.states import RunStatus
from backend.services.runs.execution import decisions
from backend.services.runs.execution.followups import Followups
from backend.services.runs.execution.transition import (
    Change,
    Decide,
    Env,
    Followup,
    RunNotFound,
    RunView,
    dispatch_entries,
    has_calls,
    parent_to_wake,
)
from backend.services.runs.storable import refused_by_database
from designer_schema.graph import WorkflowGraph

log = logging.getLogger(__name__)

STATEMENT = "statement"
LOCKED = "locked"


class Read:
    """Basis: the run read without the lock (``RunStore.read_unlocked``)."""


READ = Read()


@dataclass
class OwnWrite:
    """Basis: the run as this process last wrote it (``row`` and ``state`` as of
    ``revision``); valid while no other write moved the run."""

    row: RunRow
    state: RunState
    revision: int


Basis = Read | OwnWrite

StartDecide = Callable[[WorkflowGraph, RunState, datetime], Change]
"""The start's decision: starts new run ``state`` (queued, no steps) of ``graph`` at the
instant given; its ``Change.start`` is an attempt claimed for this process (a place of
the eager budget reserved for it), released by the writer when it is not written."""

Started = list[tuple[uuid.UUID, Followup, str]]
"""Runs a transaction started: ``(run id, what follows its commit, its new status)``."""


def lock_reason(state: RunState, change: Change) -> str | None:
    """Why ``change`` (with ``state`` as the decision left it) needs the run lock;
    ``None`` when one fenced statement writes it. THE rule of the fenced form."""
    if change.close is not None:
        return "a late completion to close without a change"
    if change.cancel_attempts:
        return "running attempts to cancel"
    if change.audit is not None:
        return "an audit row to add"
    if change.deadline_at is not None:
        return "a run timeout to set"
    if state.child_requests or state.child_cancels:
        return "child runs to create or cancel"
    if state.status.terminal and state.status != RunStatus.SUCCEEDED:
        return "the run ends: the error workflow's run commits with it"
    if not (state.changed or state.events or change.start or change.finish):
        return "nothing to write: the lock confirms the decision"
    return None


def start_lock_reason(
    settings: WorkflowSettings | None, *, copied: bool, audited: bool
) -> str | None:
    """Why a start must be written in a transaction before it is decided (``None``: the
    fenced insert may write it): steps copied from another run (re-run, replay), the
    request's audit row, admission under a concurrency limit (``settings``: the
    workflow's, ``None`` before they are read)."""
    if copied:
        return "steps copied from another run"
    if audited:
        return "an audit row to add"
    if settings is not None and settings.max_concurrent_runs:
        return "admission under a concurrency limit"
    return None


class RunWriter:
    """Applies change sets (see the module doc)."""

    def __init__(self, env: Env, followups: Followups, *, fenced: bool = True) -> None:
        self.env = env
        self.followups = followups
        self.fenced = fenced

    async def apply(
        self,
        run_id: uuid.UUID,
        decide: Decide,
        *,
        basis: Basis | None = None,
        held: HeldSteps | None = None,
    ) -> Change | None:
        """Take ``decide`` on run ``run_id`` and write its change; returns it (``None``
        when ``decide`` returned ``None``), with ``revision`` and ``form`` set once written.

        ``basis``: where the decision may be taken without the lock (``None``: under the
        lock only); ``held``: step records this process wrote, used by the locked load
        while still current. Raises :class:`RunNotFound`, whatever ``decide`` raises
        (nothing written) and :class:`~backend.engine.ports.StaleAttempt` when the change
        closes an attempt whose token no longer holds (nothing written)."""
        view = await self._unlocked_view(run_id, basis) if basis is not None else None
        if view is not None:
            run, revision = view
            change = decide(run)
            if change is None or (not change.write and change.close is None):
                return change
            if lock_reason(run.state, change) is None:
                written = await self.env.store.write_unlocked(
                    run_id,
                    run.state,
                    finish=change.finish,
                    start=change.start,
                    expected_revision=revision,
                )
                if written.revision is not None:
                    change.revision, change.form = written.revision, STATEMENT
                    followup = Followup(
                        dispatch=dispatch_entries(run.state, change.dispatch, run.now)
                    )
                    if run.state.status.terminal:
                        await self.followups.after_unlocked_end(
                            run.row, run.state, followup, written.settings
                        )
                    await self.after_commit(str(run_id), followup, run.state, change)
                    return change
                if not written.moved:
                    raise StaleAttempt(f"attempt {change.finish and change.finish.id} not current")
            held = None  # the decision edited the basis's records: load them under the lock
        return await self.locked(run_id, decide, held)

    async def _unlocked_view(self, run_id: uuid.UUID, basis: Basis) -> tuple[RunView, int] | None:
        """The run to decide on without the lock and the revision that fences the write;
        ``None`` when the change must be decided under the lock (writer not fenced, a
        graph with call steps or not cached). Raises :class:`RunNotFound`."""
        if not self.fenced:
            return None
        if isinstance(basis, OwnWrite):
            graph = self.env.store.cached_graph(basis.row.version_id)
            if graph is None or has_calls(graph):
                return None
            return RunView(basis.row, basis.state, graph, self.env.clock.now()), basis.revision
        now = self.env.clock.now()
        read = await self.env.store.read_unlocked(run_id)
        if read is None:
            raise RunNotFound(f"run {run_id} not found")
        row, state = read
        graph = await self.env.store.graph(row.version_id)
        if has_calls(graph):
            return None
        return RunView(row, state, graph, now), row.revision

    async def locked(
        self, run_id: uuid.UUID, decide: Decide, held: HeldSteps | None
    ) -> Change | None:
        """Lock run ``run_id``, load it, ``decide``, persist, commit, then follow up. The
        transition's time is read once the run is locked and read: a wait for the lock,
        or a child ending while the run is read, never dates the change before what it
        saw (a parent's end before its last child's)."""
        async with self.env.store.transaction() as tx:
            row = await tx.lock(run_id)
            if row is None:
                raise RunNotFound(f"run {run_id} not found")
            graph = await tx.graph(row.version_id)
            calls = has_calls(graph)
            outputs = functools.partial(outputs_wanted, graph, nodes=NODE_TYPES) if calls else None
            state = await tx.load(row, children=calls, held=held, outputs=outputs)
            now = self.env.clock.now()
            change = decide(RunView(row, state, graph, now))
            if change is None:
                return None
            if change.close is not None:
                change.closed = await tx.close_attempt(change.close)
            if not change.write:
                return change
            followup = await self.persist(tx, row, state, graph, change, now)
        await self.after_commit(str(run_id), followup, state, change)
        return change

    async def start(
        self,
        new: NewRun,
        decide: StartDecide,
        settings_of: Callable[[], Awaitable[WorkflowSettings]],
        *,
        locked: Callable[[], Awaitable[Started]],
        refresh: Callable[[WorkflowSettings], WorkflowSettings],
        copied: bool = False,
        audited: bool = False,
    ) -> tuple[Started, Change | None]:
        """Write the start of new run ``new`` decided by ``decide`` from the workflow's
        settings as last seen (``settings_of``; ``refresh`` records newer ones). Returns the runs
        started with what follows their commit (not yet done: the caller calls
        :meth:`after_commit`) and the change when the fenced insert wrote it (``None``
        when ``locked``, the start in a transaction, did). Raises
        :class:`~backend.engine.ports.DuplicateRun` (idempotency key taken)."""
        if not self.fenced or start_lock_reason(None, copied=copied, audited=audited):
            return await locked(), None
        settings = await settings_of()
        graph = await self.env.store.graph(new.version_id)
        for _ in range(2):  # decided again at most once when the settings just changed
            if start_lock_reason(settings, copied=copied, audited=audited) is not None:
                break
            state = new_run_state(new)
            now = new.created_at or self.env.clock.now()
            change = decide(graph, state, now)
            if lock_reason(state, change) is not None:
                self._unreserve(change)
                break
            new.deadline_at = settings.deadline(now)
            try:
                written = await self.env.store.insert_started(
                    new, state, settings, start=change.start
                )
            except BaseException as exc:
                if change.start is None:
                    raise
                self.env.eager.release()
                if not refused_by_database(exc):
                    raise
                break  # the claimed attempt's config cannot be stored: start without it
            if written.revision is not None:
                change.revision, change.form = written.revision, STATEMENT
                return [
                    (new.id, self._started(new, state, change, now), state.status.value)
                ], change
            self._unreserve(change)
            assert written.settings is not None
            settings = refresh(written.settings)
        return await locked(), None

    def _started(self, new: NewRun, state: RunState, change: Change, now: datetime) -> Followup:
        """What follows the fenced insert of started run ``new``. The run's id is unknown
        until this commit and every listener subscribes before it reads PostgreSQL: no
        announcement, except of a run that ended or answered in its start, whose notice
        carries the answer as the steps built it (a read would see jsonb's own order of
        object keys)."""
        answered = state.status.terminal or state.response is not None
        followup = Followup(
            dispatch=dispatch_entries(state, change.dispatch, now),
            notify=answered,
            state=state if answered else None,
        )
        if change.advance:  # a worker evaluates the inline steps left ready
            followup.advance.append(str(new.id))
        return followup

    def _unreserve(self, change: Change) -> None:
        """Give back the eager place a start's claim reserved (it is not written)."""
        if change.start is not None:
            self.env.eager.release()

    async def persist(
        self,
        tx: RunTransaction,
        row: RunRow,
        state: RunState,
        graph: WorkflowGraph,
        change: Change,
        now: datetime,
    ) -> Followup:
        """Write ``change`` in ``tx`` (the run locked): cancel the running attempts and
        add the audit row it asks for, create the child runs the engine asked for (in
        this transaction, so a waiting step never lacks its child), save the state with
        the attempt closed/claimed, apply what the run's end implies, and say what
        follows the commit."""
        followup = Followup()
        dispatch = list(change.dispatch)
        if change.cancel_attempts:
            await tx.cancel_running_attempts(row.id, now)
        if change.audit is not None:
            await tx.add_audit(change.audit(row.id, row.workflow_id, row.version_number))
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
        change.revision, change.form = written.revision, LOCKED
        followup.notify = written.revision != row.revision
        if ended_now:
            await self.followups.on_run_ended(tx, written, state, followup)
        followup.dispatch = dispatch_entries(state, dispatch, now)
        followup.wake_parent = parent_to_wake(row, state)
        if change.advance:
            followup.advance.append(str(row.id))
        return followup

    async def after_commit(
        self,
        run_id: str,
        followup: Followup,
        state: RunState | None = None,
        change: Change | None = None,
    ) -> None:
        """Do what follows a committed change of ``run_id`` (see
        :class:`~backend.services.runs.execution.transition.Followup`): dispatch, advance,
        cancel the child runs the change ended (the cancel decision, written by this
        writer), wake the parent, announce (``state``: the run as committed; without it
        the notice only says "changed"), and when ``change`` ended the run cancelling its
        running attempts, stop them at once here and tell the other workers."""
        dispatcher = self.env.dispatcher
        for step_id, delay in followup.dispatch:
            await dispatcher.dispatch_step(run_id, step_id, delay=delay)
        for other in followup.advance:
            await dispatcher.dispatch_advance(other)
        for child in followup.cancel:
            try:
                await self.apply(uuid.UUID(child), decisions.cancel("parent step ended"))
            except RunNotFound:
                pass
        if followup.wake_parent is not None:
            await dispatcher.dispatch_advance(followup.wake_parent)
        if followup.notify:
            await self.followups.announce(run_id, state)
        if change is not None and change.cancel_attempts:
            self.env.cancel_watch.cancel(run_id)
            await dispatcher.announce_cancel(run_id)


def new_run_state(new: NewRun) -> RunState:
    """The engine state of a run about to start (queued, no step records yet)."""
    state = RunState(
        run_id=str(new.id),
        workflow_id=str(new.workflow_id),
        version_number=new.version_number,
        status=RunStatus.QUEUED,
        input=new.input,
        steps={},
    )
    state.emit("run.created", trigger=new.trigger)
    return state
