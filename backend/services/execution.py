"""Run execution use cases: start, advance, execute a step, control a run.

This is the execution model of DESIGN.md wired to PostgreSQL:

- :meth:`Execution.start_run` inserts the run and starts it in one transaction (trigger
  step completed, control steps evaluated inline, action steps made ready), then
  dispatches the ready action steps after commit. Without a concurrency limit, copied
  steps, child runs or an immediate failure, that is one ``INSERT ... WITH`` statement in
  autocommit (the start computed in memory); otherwise the run is inserted ``queued``
  and admitted under the workflow's concurrency limit.
- :meth:`Execution.execute_step` claims an attempt with a lease and a fencing token,
  runs the connector outside any transaction (backend/services/attempts.py), and
  completes with a conditional write: a late or duplicate completion is discarded, so a
  step completes exactly once.
- The recovery pass (backend/services/recovery.py) re-dispatches ready steps whose job
  was lost, expires leases of dead workers, times out overdue runs and starts queued
  runs; Redis may lose anything, PostgreSQL holds the truth.

Run control (docs/engine.md): workflow settings ``max_concurrent_runs`` (further runs stay
``queued`` and start oldest first when a slot frees), ``run_timeout_seconds`` (a due time
``runs.deadline_at`` the sweeper enforces) and ``error_workflow_id`` (started with the
failed run's context, in the failing transaction); :meth:`Execution.rerun` repeats a run
from its failed step or from the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from backend.db.models import Attempt, Event, Run, StepRun, Workflow, WorkflowVersion
from backend.db.run_store import (
    FinishedAttempt,
    NewAttempt,
    StaleAttempt,
    Steps,
    claim_attempt,
    copy_steps,
    create_child,
    extend_lease,
    finish_attempt,
    insert_new_run,
    load_state,
    lock_run,
    save_state,
    write_state,
)
from backend.engine import orchestrator
from backend.engine.expressions import ExpressionError, resolve_config
from backend.engine.model import RunState
from backend.engine.outcomes import AttemptFailed, AttemptOutcome, AttemptSucceeded
from backend.engine.ports import Clock, ConnectorRegistry, Dispatcher, SystemClock
from backend.engine.states import RunStatus, StepStatus
from backend.services.attempts import failure, run_attempt
from backend.services.graphs import cached_graph, graph_for_version
from connectors.sdk import ActionInfo
from designer_schema.graph import WorkflowGraph

log = logging.getLogger(__name__)


class RunNotFound(LookupError):
    """No run with that id."""


@dataclass
class StartedRun:
    """Result of :meth:`Execution.start_run`; ``created`` is False for an idempotent replay."""

    run_id: uuid.UUID
    status: str
    created: bool


@dataclass
class Followup:
    """What to do after a run transaction commits.

    ``dispatch``: ``(step id, delay seconds or None)`` to enqueue; ``start_children``:
    child runs inserted in the transaction; ``cancel_children``: child runs to cancel;
    ``wake_parent``: the parent run to advance because this child run ended.
    ``start_children`` also carries queued runs to advance for other reasons: the error
    workflow's run, or the oldest queued run of a workflow whose run just ended.
    ``notify``: announce the change on the run's channel. A run created by the one-statement
    start needs no announcement: its id is unknown until the insert committed, and every
    listener (run page SSE, waiting webhook) subscribes first and then reads PostgreSQL,
    so it sees the committed state anyway (and later changes are announced by the worker).
    """

    dispatch: list[tuple[str, float | None]] = field(default_factory=list)
    start_children: list[str] = field(default_factory=list)
    cancel_children: list[str] = field(default_factory=list)
    wake_parent: str | None = None
    notify: bool = True


@dataclass
class _Claimed:
    """An attempt this worker claimed and is about to run."""

    attempt_id: int
    token: str
    number: int
    idempotency_key: str
    input: Any
    config: dict[str, Any]
    step_id: str
    node_type: str
    timeout: float | None
    workflow_id: str
    version_id: uuid.UUID
    # the run as this worker wrote it with the claim, and the revision that write gave
    # it: completing the attempt starts from this state while the revision has not moved
    revision: int | None = None
    state: RunState | None = None
    node_version: int = 1  # the node-type version the step's graph pins
    workflow_version: int = 0  # the run's version number


class RunNotActive(ValueError):
    """The run is not in a state that allows the request (e.g. resume a running run)."""


ACTIVE_RUN_STATUSES = (RunStatus.RUNNING.value, RunStatus.WAITING.value, RunStatus.PAUSED.value)
"""Statuses that hold a slot of a workflow's ``max_concurrent_runs``."""

ANNOUNCE_DELAY_SECONDS = 0.002
"""How long a run-change notice waits behind the work that follows a commit (seconds)."""

ERROR_RUN_NAMESPACE = uuid.UUID("5f0c7a52-3d1e-4f53-9a53-6c1f2b7e0e11")


def error_run_id(failed_run_id: uuid.UUID | str) -> uuid.UUID:
    """Deterministic id of the error-workflow run started for ``failed_run_id`` (UUID 5),
    so it is inserted at most once and the failed run's page can link it."""
    return uuid.uuid5(ERROR_RUN_NAMESPACE, str(failed_run_id))


async def active_version_of(
    session: AsyncSession, workflow_id: uuid.UUID
) -> WorkflowVersion | None:
    """The active version of a workflow (``None``: never published, or no such workflow)."""
    return (
        await session.execute(
            select(WorkflowVersion)
            .join(
                Workflow,
                (WorkflowVersion.workflow_id == Workflow.id)
                & (WorkflowVersion.number == Workflow.active_version),
            )
            .where(Workflow.id == workflow_id)
        )
    ).scalar_one_or_none()


async def workflow_settings(session: AsyncSession, workflow_id: uuid.UUID) -> dict[str, Any]:
    """The run-control settings of a workflow (``{}`` when none or the workflow is gone)."""
    found = (
        await session.execute(select(Workflow.settings).where(Workflow.id == workflow_id))
    ).scalar_one_or_none()
    return dict(found or {})


def _dispatch_entries(
    state: RunState, dispatch: list[str], now: Any
) -> list[tuple[str, float | None]]:
    """``(step id, delay seconds or None)`` for each step to dispatch, once each (a
    timer's delay runs to its ``not_before``)."""
    entries = []
    for step_id in dict.fromkeys(dispatch):
        rec = state.steps.get(step_id)
        delay = None
        if rec is not None and rec.not_before is not None and rec.not_before > now:
            delay = (rec.not_before - now).total_seconds()
        entries.append((step_id, delay))
    return entries


def worker_name() -> str:
    """``host:pid`` of this process, recorded on attempts."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Execution:
    """Execution service; one per process.

    ``context_factory(info: dict) -> context`` builds the connector SDK's action context
    (kept outside so this module does not depend on the SDK). ``lease_seconds`` is the
    attempt lease; a heartbeat renews it every third of it. ``base_url`` (the public URL of
    the app) builds the run links handed to error workflows.
    """

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        dispatcher: Dispatcher,
        registry: ConnectorRegistry,
        context_factory: Any,
        *,
        clock: Clock | None = None,
        lease_seconds: float = 60.0,
        base_url: str = "",
    ) -> None:
        self.sessionmaker = sessionmaker
        self.dispatcher = dispatcher
        self.registry = registry
        self.context_factory = context_factory
        self.clock = clock or SystemClock()
        self.lease_seconds = lease_seconds
        self.worker = worker_name()
        self.base_url = base_url.rstrip("/")
        self._announcing: set[asyncio.Task[None]] = set()

    # -- start -----------------------------------------------------------------------

    async def start_run(
        self,
        version: WorkflowVersion,
        input: Any,
        *,
        trigger: str,
        idempotency_key: str | None = None,
        user_id: uuid.UUID | None = None,
        rerun_of: uuid.UUID | None = None,
        copy_steps_from: uuid.UUID | None = None,
    ) -> StartedRun:
        """Store and start a run of ``version`` with ``input`` (JSON-able).

        With ``idempotency_key``, a second call with the same key returns the first run
        (``created=False``) instead of starting another. When the workflow's
        ``max_concurrent_runs`` is reached, the run is stored ``queued`` and starts when a
        slot frees (oldest first). ``rerun_of`` links the run it repeats;
        ``copy_steps_from`` (a run of the same version) copies that run's succeeded step
        records not downstream of a failure, so execution resumes at the failed step(s).
        """
        now = self.clock.now()
        try:
            fast = None
            if copy_steps_from is None:
                fast = await self._start_in_one_statement(
                    version, input, trigger, idempotency_key, user_id, rerun_of, now
                )
            if fast is not None:
                run_id, followup, status = fast
                followups = [(run_id, followup)]
            else:
                run_id = uuid.uuid4()
                async with self.sessionmaker() as session, session.begin():
                    run = Run(
                        id=run_id,
                        workflow_id=version.workflow_id,
                        version_id=version.id,
                        version_number=version.number,
                        status=RunStatus.QUEUED.value,
                        trigger=trigger,
                        idempotency_key=idempotency_key,
                        input=input,
                        created_by=user_id,
                        created_at=now,
                        rerun_of=rerun_of,
                    )
                    session.add(run)
                    await session.flush()
                    session.add(Event(run_id=run_id, kind="run.created", data={"trigger": trigger}))
                    if copy_steps_from is not None:
                        await self._copy_steps(session, run, copy_steps_from)
                    followups = await self._start_or_queue(session, run, now)
                    status = run.status
        except IntegrityError:
            if idempotency_key is None:
                raise
            async with self.sessionmaker() as session:
                existing = (
                    await session.execute(select(Run).where(Run.idempotency_key == idempotency_key))
                ).scalar_one()
                return StartedRun(existing.id, existing.status, False)
        for started_id, followup in followups:
            await self._after_commit(started_id, followup)
        return StartedRun(run_id, status, True)

    async def _start_in_one_statement(
        self,
        version: WorkflowVersion,
        input: Any,
        trigger: str,
        idempotency_key: str | None,
        user_id: uuid.UUID | None,
        rerun_of: uuid.UUID | None,
        now: Any,
    ) -> tuple[uuid.UUID, Followup, str] | None:
        """The fast start: ``(run id, what follows, status)``, or ``None`` with nothing
        written when the run needs the transactional path.

        A new run has no rows to load or lock, so its start is computed in memory and
        stored with ONE statement in autocommit (atomic by itself, no BEGIN/COMMIT round
        trips; :func:`~backend.db.run_store.insert_new_run`): run (with the run timeout's
        ``deadline_at``), step records and events, the same rows the transactional path
        writes. That path is taken instead (``None``) when the workflow has
        ``max_concurrent_runs`` (the run is queued and admitted under the workflow row
        lock), when the start asks for child runs (a Sub-workflow or For-each right after
        the trigger), or when the run failed at once (the error workflow's run is inserted
        in the failing transaction).
        """
        graph = await self._graph(version.id)
        run_id = uuid.uuid4()
        state = RunState(
            run_id=str(run_id),
            workflow_id=str(version.workflow_id),
            version_number=version.number,
            status=RunStatus.QUEUED,
            input=input,
            steps={},
        )
        state.emit("run.created", trigger=trigger)
        dispatch = orchestrator.start(graph, state, now)
        if (
            state.child_requests
            or state.child_cancels
            or state.status in (RunStatus.FAILED, RunStatus.TIMED_OUT)
        ):
            return None
        row = {
            "id": run_id,
            "workflow_id": version.workflow_id,
            "version_id": version.id,
            "version_number": version.number,
            "trigger": trigger,
            "idempotency_key": idempotency_key,
            "created_by": user_id,
            "created_at": now,
            "rerun_of": rerun_of,
        }
        async with self._autocommit() as conn:
            if not await insert_new_run(conn, row, state):
                return None
        followup = Followup(dispatch=_dispatch_entries(state, dispatch, now), notify=False)
        return run_id, followup, state.status.value

    async def _graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        """The graph of a version, from the process cache without I/O when it is there."""
        graph = cached_graph(version_id)
        if graph is None:
            async with self.sessionmaker() as session:
                graph = await graph_for_version(session, version_id)
        return graph

    async def _copy_steps(self, session: AsyncSession, run: Run, source_id: uuid.UUID) -> None:
        """Copy the succeeded step records of run ``source_id`` into new run ``run``.

        A succeeded step downstream of a step that did not succeed (failed, cancelled,
        unfinished; also an error-port branch) is not copied: it runs again after the
        failed step. Skipped steps are not copied either (dead-path elimination decides
        them again).
        """
        graph = await graph_for_version(session, run.version_id)
        rows = {
            r.step_id: r
            for r in (
                await session.execute(select(StepRun).where(StepRun.run_id == source_id))
            ).scalars()
        }
        dirty: set[str] = set()
        todo = [
            s.id
            for s in graph.steps
            if rows.get(s.id) is None
            or rows[s.id].status not in (StepStatus.SUCCEEDED.value, StepStatus.SKIPPED.value)
        ]
        while todo:
            sid = todo.pop()
            if sid in dirty:
                continue
            dirty.add(sid)
            todo.extend(t.target for t in graph.outgoing(sid))
        copied = [
            s.id
            for s in graph.steps
            if (row := rows.get(s.id)) is not None
            and s.id not in dirty
            and row.status == StepStatus.SUCCEEDED.value
        ]
        await copy_steps(session, source_id, run.id, copied)
        session.add(
            Event(
                run_id=run.id,
                kind="run.steps_copied",
                data={"from_run_id": str(source_id), "steps": copied},
            )
        )
        await session.flush()

    async def _start_or_queue(
        self, session: AsyncSession, run: Run, now: Any
    ) -> list[tuple[uuid.UUID, Followup]]:
        """Start queued ``run`` (new or locked by the caller), or leave it queued while its
        workflow has ``max_concurrent_runs`` active runs. Returns the runs started (this
        one and/or older queued runs of the workflow) with what follows each."""
        settings = await workflow_settings(session, run.workflow_id)
        limit = settings.get("max_concurrent_runs")
        if limit:
            return await self._admit(session, run.workflow_id, int(limit), now)
        return [(run.id, await self._start_locked(session, run, settings, now))]

    async def _start_locked(
        self, session: AsyncSession, run: Run, settings: dict[str, Any], now: Any
    ) -> Followup:
        """Start queued ``run`` (row locked or new): the trigger step completes, the first
        steps become ready; the run timeout's due time is set from ``settings``."""
        graph = await graph_for_version(session, run.version_id)
        state = await load_state(session, run)
        dispatch = orchestrator.start(graph, state, now)
        timeout = settings.get("run_timeout_seconds")
        if timeout:
            run.deadline_at = now + timedelta(seconds=float(timeout))
        return await self._persist(session, run, state, graph, dispatch, now)

    async def _admit(
        self, session: AsyncSession, workflow_id: uuid.UUID, limit: int, now: Any
    ) -> list[tuple[uuid.UUID, Followup]]:
        """Start the oldest queued runs of a workflow while fewer than ``limit`` are active.

        The workflow row is locked first (``FOR UPDATE``), so concurrent admissions of
        one workflow are serialised and the limit holds; runs start in creation order.
        The caller holds no run lock (lock order: workflow row, then run rows).
        """
        await session.execute(
            select(Workflow.id).where(Workflow.id == workflow_id).with_for_update()
        )
        settings = await workflow_settings(session, workflow_id)
        active = (
            await session.execute(
                select(func.count())
                .select_from(Run)
                .where(Run.workflow_id == workflow_id, Run.status.in_(ACTIVE_RUN_STATUSES))
            )
        ).scalar_one()
        free = limit - int(active)
        if free <= 0:
            return []
        queued = (
            (
                await session.execute(
                    select(Run.id)
                    .where(Run.workflow_id == workflow_id, Run.status == RunStatus.QUEUED.value)
                    .order_by(Run.created_at, Run.id)
                    .limit(free)
                )
            )
            .scalars()
            .all()
        )
        started = []
        for queued_id in queued:
            run = await lock_run(session, queued_id)
            if run is None or run.status != RunStatus.QUEUED.value:
                continue
            started.append((queued_id, await self._start_locked(session, run, settings, now)))
        return started

    async def admit_queued(self, workflow_id: uuid.UUID) -> int:
        """Start the oldest queued runs of ``workflow_id`` that fit its concurrency limit
        (all of them when it has none). Returns how many started."""
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            limit = (await workflow_settings(session, workflow_id)).get("max_concurrent_runs")
            started = await self._admit(session, workflow_id, int(limit or 1_000_000), now)
        for run_id, followup in started:
            await self._after_commit(run_id, followup)
        return len(started)

    async def _persist(
        self,
        session: AsyncSession,
        run: Run,
        state: RunState,
        graph: WorkflowGraph,
        dispatch: list[str],
        now: Any,
        *,
        finish: FinishedAttempt | None = None,
        start: NewAttempt | None = None,
    ) -> Followup:
        """Create the child runs the engine asked for, save the state, say what follows.

        Child runs are inserted in the caller's transaction (with the parent's step
        change), so a crash never leaves a waiting step without its child or vice versa.
        ``finish`` and ``start`` are written with the state (see
        :func:`~backend.db.run_store.save_state`; a stale ``finish`` raises
        :class:`~backend.db.run_store.StaleAttempt`).
        """
        followup = Followup()
        dispatch = list(dispatch)
        while state.child_requests:
            requests, state.child_requests = state.child_requests, []
            for request in requests:
                entry = await create_child(session, run, request)
                if entry.status == RunStatus.QUEUED.value:
                    followup.start_children.append(request.run_id)
                elif not request.wait:
                    state.emit("child.not_started", request.step_id, error=entry.error)
                if request.wait:
                    state.children.setdefault(request.step_id, []).append(entry)
            dispatch += orchestrator.advance(graph, state, now)
        followup.cancel_children, state.child_cancels = state.child_cancels, []
        ended_now = state.status.terminal and not RunStatus(run.status).terminal
        await save_state(session, run, state, finish=finish, start=start)
        if ended_now:
            await self._on_run_ended(session, run, state, followup)
        followup.dispatch = _dispatch_entries(state, dispatch, now)
        if run.parent_run_id is not None and state.status.terminal:
            followup.wake_parent = str(run.parent_run_id)
        return followup

    async def _on_run_ended(
        self, session: AsyncSession, run: Run, state: RunState, followup: Followup
    ) -> None:
        """In the transaction that ended ``run``: free its concurrency slot (advance the
        oldest queued run of the workflow after commit) and, for a failed or timed-out run,
        insert the error workflow's run (queued, trigger ``error``)."""
        settings = await workflow_settings(session, run.workflow_id)
        if settings.get("max_concurrent_runs"):
            oldest = (
                await session.execute(
                    select(Run.id)
                    .where(Run.workflow_id == run.workflow_id, Run.status == RunStatus.QUEUED.value)
                    .order_by(Run.created_at, Run.id)
                    .limit(1)
                )
            ).scalar_one_or_none()
            if oldest is not None:
                followup.start_children.append(str(oldest))
        error_workflow = settings.get("error_workflow_id")
        if (
            error_workflow
            and state.status in (RunStatus.FAILED, RunStatus.TIMED_OUT)
            and run.trigger != "error"
            and str(error_workflow) != str(run.workflow_id)
        ):
            started = await self._insert_error_run(session, run, state, uuid.UUID(error_workflow))
            if started is not None:
                followup.start_children.append(started)

    async def _insert_error_run(
        self, session: AsyncSession, run: Run, state: RunState, error_workflow_id: uuid.UUID
    ) -> str | None:
        """Insert the queued error-workflow run for failed ``run``; ``None`` (and an event
        on the failed run) when the error workflow has no active version."""
        version = await active_version_of(session, error_workflow_id)
        if version is None:
            session.add(
                Event(
                    run_id=run.id,
                    kind="error_workflow.not_started",
                    data={"error_workflow_id": str(error_workflow_id), "reason": "not published"},
                )
            )
            return None
        name = (
            await session.execute(select(Workflow.name).where(Workflow.id == run.workflow_id))
        ).scalar_one_or_none()
        error = dict(state.error or {})
        context = {
            "run_id": str(run.id),
            "workflow_id": str(run.workflow_id),
            "workflow_name": name,
            "status": state.status.value,
            "error": error,
            "failed_step": error.get("step_id"),
            "input": run.input,
            "url": f"{self.base_url}/runs/{run.id}",
        }
        new_id = error_run_id(run.id)
        await session.execute(
            insert(Run)
            .values(
                id=new_id,
                workflow_id=version.workflow_id,
                version_id=version.id,
                version_number=version.number,
                status=RunStatus.QUEUED.value,
                trigger="error",
                input=context,
                created_by=run.created_by,
            )
            .on_conflict_do_nothing(index_elements=["id"])
        )
        session.add(
            Event(run_id=run.id, kind="error_workflow.started", data={"run_id": str(new_id)})
        )
        return str(new_id)

    async def _after_commit(self, run_id: uuid.UUID, followup: Followup) -> None:
        for step_id, delay in followup.dispatch:
            await self.dispatcher.dispatch_step(str(run_id), step_id, delay=delay)
        for child in followup.start_children:
            await self.dispatcher.dispatch_advance(child)
        for child in followup.cancel_children:
            try:
                await self.cancel_run(uuid.UUID(child), "parent step ended")
            except RunNotFound:
                pass
        if followup.wake_parent is not None:
            await self.dispatcher.dispatch_advance(followup.wake_parent)
        if followup.notify:
            task = asyncio.create_task(self._announce(str(run_id)))
            self._announcing.add(task)
            task.add_done_callback(self._announcing.discard)

    async def _announce(self, run_id: str) -> None:
        """Publish a run-change notice a moment later, in the background: a worker that
        continues the run inline sends the next step's request first (the notice is for
        live pages and waiting webhooks, which then read PostgreSQL)."""
        await asyncio.sleep(ANNOUNCE_DELAY_SECONDS)
        await self.dispatcher.notify(run_id)

    @contextlib.asynccontextmanager
    async def _autocommit(self) -> AsyncIterator[AsyncConnection]:
        """A pooled connection whose statements each commit on their own: a single
        statement is then its own transaction (no BEGIN/COMMIT round trips)."""
        engine = self.sessionmaker.kw["bind"]
        async with engine.connect() as conn:
            yield await conn.execution_options(isolation_level="AUTOCOMMIT")

    async def drain(self) -> None:
        """Wait for run-change announcements still being published (before closing Redis)."""
        while self._announcing:
            await asyncio.gather(*self._announcing, return_exceptions=True)

    # -- advance ---------------------------------------------------------------------

    async def advance_run(self, run_id: uuid.UUID) -> None:
        """Advance a run (used after recovery and by the sweeper); starts a queued run
        when its workflow's concurrency limit allows (else the oldest queued ones that fit).
        """
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            peek = (
                await session.execute(select(Run.status, Run.workflow_id).where(Run.id == run_id))
            ).one_or_none()
            if peek is None:
                return
            if peek[0] == RunStatus.QUEUED.value:
                # no run lock yet: admission locks the workflow row first
                followups = await self._start_or_queue_by_id(session, run_id, peek[1], now)
            else:
                run = await lock_run(session, run_id)
                if run is None:
                    return
                graph = await graph_for_version(session, run.version_id)
                state = await load_state(session, run)
                dispatch = orchestrator.advance(graph, state, now)
                followup = await self._persist(session, run, state, graph, dispatch, now)
                followups = [(run_id, followup)]
        for started_id, followup in followups:
            await self._after_commit(started_id, followup)

    async def _start_or_queue_by_id(
        self, session: AsyncSession, run_id: uuid.UUID, workflow_id: uuid.UUID, now: Any
    ) -> list[tuple[uuid.UUID, Followup]]:
        limit = (await workflow_settings(session, workflow_id)).get("max_concurrent_runs")
        if limit:
            return await self._admit(session, workflow_id, int(limit), now)
        run = await lock_run(session, run_id)
        if run is None or run.status != RunStatus.QUEUED.value:
            return []
        return await self._start_or_queue(session, run, now)

    async def pause_run(self, run_id: uuid.UUID) -> None:
        """Pause a running or waiting run: nothing new starts; running attempts finish.

        Raises :class:`RunNotFound` or :class:`RunNotActive` (the run is not running or
        waiting).
        """
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            run, state = await _locked_state(session, run_id)
            if state.status not in (RunStatus.RUNNING, RunStatus.WAITING):
                raise RunNotActive(f"run is {state.status.value}; only active runs pause")
            state.move(RunStatus.PAUSED)
            state.emit("run.paused", at=now.isoformat())
            await save_state(session, run, state)
        await self.dispatcher.notify(str(run_id))

    async def resume_run(self, run_id: uuid.UUID) -> None:
        """Resume a paused run: advance it and dispatch every ready step again.

        Raises :class:`RunNotFound` or :class:`RunNotActive` (the run is not paused).
        """
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            run, state = await _locked_state(session, run_id)
            if state.status != RunStatus.PAUSED:
                raise RunNotActive(f"run is {state.status.value}; only paused runs resume")
            state.move(RunStatus.RUNNING)
            state.emit("run.resumed")
            graph = await graph_for_version(session, run.version_id)
            dispatch = orchestrator.advance(graph, state, now)
            dispatch += [
                sid
                for sid, rec in state.steps.items()
                if rec.status == StepStatus.READY and sid not in dispatch
            ]
            followup = await self._persist(session, run, state, graph, dispatch, now)
        await self._after_commit(run_id, followup)

    async def cancel_run(self, run_id: uuid.UUID, reason: str) -> bool:
        """Cancel a run that has not ended. Returns False when it had already ended."""

        def apply(state: RunState, _run: Run, now: Any) -> None:
            orchestrator.cancel(state, now, reason)

        return await self._end_run(run_id, apply)

    async def timeout_run(self, run_id: uuid.UUID) -> bool:
        """End a run whose run timeout (``runs.deadline_at``) has passed: ``timed_out``.

        Running attempts are cancelled (their workers see it at the next heartbeat: the
        SDK's ``is_cancelled()`` turns true and the action task is cancelled; a late
        completion is discarded), unfinished children are cancelled, the error workflow
        starts. Returns False when the run already ended or is not overdue.
        """

        def apply(state: RunState, run: Run, now: Any) -> None:
            deadline = run.deadline_at or now
            seconds = (deadline - (run.started_at or run.created_at)).total_seconds()
            orchestrator.time_out(state, now, f"run timed out after {seconds:g} s")

        return await self._end_run(run_id, apply, overdue_only=True)

    async def _end_run(self, run_id: uuid.UUID, apply: Any, *, overdue_only: bool = False) -> bool:
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            run, state = await _locked_state(session, run_id)
            if state.status.terminal:
                return False
            if overdue_only and (run.deadline_at is None or run.deadline_at > now):
                return False
            apply(state, run, now)
            await session.execute(
                update(Attempt)
                .where(Attempt.run_id == run_id, Attempt.status == "running")
                .values(status="cancelled", finished_at=now)
            )
            graph = await graph_for_version(session, run.version_id)
            followup = await self._persist(session, run, state, graph, [], now)
        await self._after_commit(run_id, followup)
        return True

    async def rerun(
        self, run_id: uuid.UUID, *, start_from: str, user_id: uuid.UUID | None = None
    ) -> StartedRun:
        """Start a new run repeating ended run ``run_id`` (linked by ``rerun_of``).

        ``start_from="failed_step"``: same version, same input; the original's succeeded
        steps (not downstream of a failure) are copied with their outputs and execution
        resumes at the failed step(s); only for failed, timed-out or cancelled runs.
        ``start_from="start"``: the workflow's current active version with the original
        input. Raises :class:`RunNotFound`, :class:`RunNotActive` (the run has not ended,
        did not fail, or the workflow has no active version) or ``ValueError`` for another
        ``start_from``.
        """
        if start_from not in ("failed_step", "start"):
            raise ValueError(f'"from" must be "failed_step" or "start", got {start_from!r}')
        async with self.sessionmaker() as session:
            run = await session.get(Run, run_id)
            if run is None:
                raise RunNotFound(f"run {run_id} not found")
            if not RunStatus(run.status).terminal:
                raise RunNotActive(f"run is {run.status}; only ended runs can be re-run")
            if start_from == "failed_step":
                if run.status == RunStatus.SUCCEEDED.value:
                    raise RunNotActive("run succeeded; it has no failed step to re-run from")
                version = await session.get(WorkflowVersion, run.version_id)
            else:
                version = await active_version_of(session, run.workflow_id)
            if version is None:
                raise RunNotActive("the workflow has no active version to re-run")
        return await self.start_run(
            version,
            run.input,
            trigger="rerun",
            user_id=user_id,
            rerun_of=run.id,
            copy_steps_from=run.id if start_from == "failed_step" else None,
        )

    # -- execute a step --------------------------------------------------------------

    async def execute_step(self, run_id: uuid.UUID, step_id: str) -> None:
        """Claim, run and complete one attempt of ``step_id`` (an arq job body).

        Safe to call twice for the same step: only a ``ready`` step can be claimed. When
        completing the step makes exactly one next action step ready now, the same
        transaction claims it and this worker runs it directly (no queue round trip, one
        commit per step transition; measured in bench/engine.py); other ready steps go
        through the dispatcher. A job also enqueued for a claimed step finds it claimed
        and stops.
        """
        claimed = await self._start_step(run_id, step_id)
        while claimed is not None:
            info = ActionInfo(
                run_id=str(run_id),
                workflow_id=claimed.workflow_id,
                step_id=claimed.step_id,
                attempt=claimed.number,
                idempotency_key=claimed.idempotency_key,
                node_type=claimed.node_type,
                workflow_version=claimed.workflow_version,
                node_version=claimed.node_version,
            )
            outcome = await self._run_action(
                claimed.node_type,
                claimed.config,
                claimed.input,
                info,
                claimed.attempt_id,
                claimed.token,
                claimed.timeout,
            )
            claimed = await self._complete(run_id, claimed, outcome)

    async def _start_step(self, run_id: uuid.UUID, step_id: str) -> _Claimed | None:
        """Claim ready action ``step_id`` (or fire it when it is a due timer)."""
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            run = await lock_run(session, run_id)
            if run is None or RunStatus(run.status).terminal or run.status == "paused":
                return None
            graph = await graph_for_version(session, run.version_id)
            state = await load_state(session, run, children=has_calls(graph))
            rec = state.steps.get(step_id)
            if rec is None or rec.status != StepStatus.READY:
                return None
            if rec.not_before is not None and rec.not_before > now:
                delay = (rec.not_before - now).total_seconds()
                await self.dispatcher.dispatch_step(str(run_id), step_id, delay=delay)
                return None
            step = graph.step(step_id)
            claimed: _Claimed | None = None
            if orchestrator.behaviour_kind(step) == "timer":
                dispatch = orchestrator.fire_timer(graph, state, step_id, now)
                followup = await self._persist(session, run, state, graph, dispatch, now)
            else:
                claimed, followup = await self._claim(session, run, state, graph, step_id, now)
        await self._after_commit(run_id, followup)
        return claimed

    async def _claim(
        self,
        session: AsyncSession,
        run: Run,
        state: RunState,
        graph: WorkflowGraph,
        step_id: str,
        now: Any,
        *,
        finish: FinishedAttempt | None = None,
    ) -> tuple[_Claimed | None, Followup]:
        """Resolve the config and claim an attempt of ``step_id``, saving it with ``state``
        (and ``finish``, the attempt just completed, when given) in one write; or fail the
        step on an expression error (then ``None``, with the failure saved the same way).
        Returns what follows the save."""
        try:
            config = _resolve(graph, state, step_id)
        except ExpressionError as exc:
            state.steps[step_id].attempts += 1
            error = {"message": str(exc), "kind": "expression_error"}
            dispatch, _ = orchestrator.fail_action(
                graph, state, step_id, error, now, retryable=False
            )
            followup = await self._persist(session, run, state, graph, dispatch, now, finish=finish)
            return None, followup
        attempt = self._new_attempt(state, step_id, config, run.id, now)
        followup = await self._persist(
            session, run, state, graph, [], now, finish=finish, start=attempt
        )
        claimed = _claimed(graph, state, attempt, run.workflow_id, run.version_id, run.revision)
        return claimed, followup

    def _new_attempt(
        self, state: RunState, step_id: str, config: dict[str, Any], run_id: uuid.UUID, now: Any
    ) -> NewAttempt:
        """Claim an attempt of ready ``step_id`` in ``state`` (written by the caller)."""
        return claim_attempt(
            state,
            step_id,
            run_id=run_id,
            worker=self.worker,
            input=state.steps[step_id].input,
            config=config,
            now=now,
            lease_until=now + timedelta(seconds=self.lease_seconds),
        )

    async def _run_action(
        self,
        node_type: str,
        config: dict[str, Any],
        input: Any,
        info: ActionInfo,
        attempt_id: int,
        token: str,
        timeout: float | None,
    ) -> AttemptOutcome:
        """Run one attempt (backend/services/attempts.py), renewing its lease in
        PostgreSQL while it runs; returns the outcome."""
        runner = self.registry.action(node_type, info.node_version)
        if runner is None:
            return failure(f"no installed connector provides {node_type}", "unknown_node_type")

        async def renew_lease() -> bool:
            async with self.sessionmaker() as session, session.begin():
                until = self.clock.now() + timedelta(seconds=self.lease_seconds)
                return await extend_lease(session, attempt_id, token, until)

        return await run_attempt(
            runner,
            config,
            input,
            lambda heartbeat, is_cancelled: self.context_factory(info, heartbeat, is_cancelled),
            renew_lease=renew_lease,
            heartbeat_every=self.lease_seconds / 3,
            timeout=timeout,
        )

    async def _complete(
        self, run_id: uuid.UUID, done: _Claimed, outcome: AttemptOutcome
    ) -> _Claimed | None:
        """Record the outcome of attempt ``done`` and advance the run.

        When that makes exactly one action step ready now, the same write claims it and it
        is returned for this worker to run; everything else is dispatched after commit.
        First without a lock, from the state this worker wrote with the claim
        (:meth:`_complete_unlocked`); when the run moved since, under the run lock.
        """
        if done.state is not None:
            claimed = await self._complete_unlocked(run_id, done, outcome)
            if not isinstance(claimed, _Moved):
                return claimed
        return await self._complete_locked(run_id, done, outcome)

    async def _complete_unlocked(
        self, run_id: uuid.UUID, done: _Claimed, outcome: AttemptOutcome
    ) -> _Claimed | _Moved | None:
        """Complete ``done`` from the run state this worker wrote with the claim, in ONE
        autocommit statement that writes only if the run is still at that revision (it
        locks the row while it checks and writes; docs/engine.md, "Performance").

        Returns ``_MOVED`` (nothing written) when the run changed since, or when the
        transition needs more than the one statement (child runs, the run ending, an
        expression error in the next step's config): the locked path then does it.
        """
        graph = cached_graph(done.version_id)
        state = done.state
        if state is None or graph is None or has_calls(graph) or not _is_current(state, done):
            return _MOVED
        done.state = None  # changed below: the locked path must not reuse it
        now = self.clock.now()
        dispatch = _apply_outcome(graph, state, done, outcome, now)
        if state.child_requests or state.child_cancels or state.status.terminal:
            return _MOVED
        inline = _inline_candidate(graph, state, dispatch, now)
        start: NewAttempt | None = None
        if inline is not None:
            try:
                config = _resolve(graph, state, inline)
            except ExpressionError:
                return _MOVED
            start = self._new_attempt(state, inline, config, run_id, now)
            dispatch = []
        async with self._autocommit() as conn:
            written = await write_state(
                conn,
                run_id,
                state,
                finish=_finished(done, outcome, now),
                start=start,
                expected_revision=done.revision,
            )
        if written.revision is None:
            if written.moved:
                return _MOVED
            log.info("discarded late completion of %s/%s", run_id, done.step_id)
            return None
        await self._after_commit(run_id, Followup(dispatch=_dispatch_entries(state, dispatch, now)))
        if start is None:
            return None
        return _claimed(
            graph,
            state,
            start,
            uuid.UUID(done.workflow_id),
            done.version_id,
            written.revision,
        )

    async def _complete_locked(
        self, run_id: uuid.UUID, done: _Claimed, outcome: AttemptOutcome
    ) -> _Claimed | None:
        """Complete ``done`` in a transaction holding the run lock (the general path).

        The attempt is closed, the state saved and the next attempt claimed by ONE write,
        fenced by ``done``'s token: a completion that lost its lease writes nothing.
        """
        now = self.clock.now()
        finish = _finished(done, outcome, now)
        held = None
        if done.state is not None and done.revision is not None:
            held = Steps(done.revision, done.state.steps)
        try:
            async with self.sessionmaker() as session, session.begin():
                run = await lock_run(session, run_id)
                if run is None:
                    return None
                graph = await graph_for_version(session, run.version_id)
                state = await load_state(session, run, children=has_calls(graph), steps=held)
                if not _is_current(state, done):
                    # no longer the step's current attempt: close it if still open, discard
                    if not await finish_attempt(
                        session,
                        finish.id,
                        finish.fencing_token,
                        status=finish.status,
                        output=finish.output,
                        error=finish.error,
                        now=now,
                    ):
                        log.info("discarded late completion of %s/%s", run_id, done.step_id)
                    return None
                dispatch = _apply_outcome(graph, state, done, outcome, now)
                claimed: _Claimed | None = None
                inline = _inline_candidate(graph, state, dispatch, now)
                if inline is None:
                    followup = await self._persist(
                        session, run, state, graph, dispatch, now, finish=finish
                    )
                else:  # claim it: closing, saving and claiming are one write
                    claimed, followup = await self._claim(
                        session, run, state, graph, inline, now, finish=finish
                    )
        except StaleAttempt:
            log.info("discarded late completion of %s/%s", run_id, done.step_id)
            return None
        await self._after_commit(run_id, followup)
        return claimed

    # -- recovery --------------------------------------------------------------------

    async def load_run_state(self, run_id: uuid.UUID) -> RunState:
        """Read-only snapshot of a run's state (no lock)."""
        async with self.sessionmaker() as session:
            run = await session.get(Run, run_id)
            if run is None:
                raise RunNotFound(str(run_id))
            return await load_state(session, run)


def has_calls(graph: WorkflowGraph) -> bool:
    """True when ``graph`` has a Sub-workflow or For-each step (its runs may have children)."""
    return any(orchestrator.behaviour_kind(step) == "call" for step in graph.steps)


async def _locked_state(session: AsyncSession, run_id: uuid.UUID) -> tuple[Run, RunState]:
    """The run row locked ``FOR UPDATE`` and its state; raises :class:`RunNotFound`."""
    run = await lock_run(session, run_id)
    if run is None:
        raise RunNotFound(str(run_id))
    return run, await load_state(session, run)


class _Moved:
    """Marker: the run moved since the worker's own write; complete under the lock."""


_MOVED = _Moved()


def _is_current(state: RunState, done: _Claimed) -> bool:
    """True while ``done`` is the current attempt of its step in an active run (not
    expired and re-claimed, not cancelled or timed out with the run)."""
    rec = state.steps.get(done.step_id)
    return (
        not state.status.terminal
        and rec is not None
        and rec.status == StepStatus.RUNNING
        and rec.attempts == done.number
    )


def _apply_outcome(
    graph: WorkflowGraph, state: RunState, done: _Claimed, outcome: AttemptOutcome, now: Any
) -> list[str]:
    """Let the engine complete or fail ``done``'s step; the steps to dispatch (the step
    itself when it waits to be retried)."""
    dispatch, delay = orchestrator.record_outcome(graph, state, done.step_id, outcome, now)
    return [done.step_id] if delay is not None else dispatch


def _resolve(graph: WorkflowGraph, state: RunState, step_id: str) -> dict[str, Any]:
    """The config of ``step_id`` with its expressions evaluated against the run state.

    Raises :class:`~backend.engine.expressions.ExpressionError`."""
    step = graph.step(step_id)
    bindings = orchestrator.bindings(graph, state)
    return resolve_config(step.config, step.expressions, state.steps[step_id].input, bindings)


def _finished(done: _Claimed, outcome: AttemptOutcome, now: Any) -> FinishedAttempt:
    """The attempt row's closing values for ``outcome``."""
    return FinishedAttempt(
        done.attempt_id,
        done.token,
        status="succeeded" if isinstance(outcome, AttemptSucceeded) else "failed",
        output=outcome.output if isinstance(outcome, AttemptSucceeded) else None,
        error=outcome.error if isinstance(outcome, AttemptFailed) else None,
        finished_at=now,
    )


def _claimed(
    graph: WorkflowGraph,
    state: RunState,
    attempt: NewAttempt,
    workflow_id: uuid.UUID,
    version_id: uuid.UUID,
    revision: int,
) -> _Claimed:
    """The attempt this worker runs next, with the run state as of its write."""
    assert attempt.id is not None  # set by the write
    step = graph.step(attempt.step_id)
    return _Claimed(
        attempt.id,
        attempt.fencing_token,
        attempt.number,
        attempt.idempotency_key,
        attempt.input,
        attempt.config,
        step_id=attempt.step_id,
        node_type=step.type,
        timeout=step.timeout,
        workflow_id=str(workflow_id),
        version_id=version_id,
        revision=revision,
        state=state,
        node_version=step.type_version,
        workflow_version=state.version_number,
    )


def _inline_candidate(
    graph: WorkflowGraph, state: RunState, dispatch: list[str], now: Any
) -> str | None:
    """The step to claim in the completing transaction: the only step to dispatch, when it
    is an action step due now and no child runs are being created (they may make more
    steps ready)."""
    if len(set(dispatch)) != 1 or state.child_requests:
        return None
    step_id = dispatch[0]
    rec = state.steps.get(step_id)
    if graph.step(step_id).kind != "action" or rec is None or rec.status != StepStatus.READY:
        return None
    if rec.not_before is not None and rec.not_before > now:
        return None
    return step_id
