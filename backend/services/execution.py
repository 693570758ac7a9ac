"""Run execution use cases: start, advance, execute a step, sweep.

This is the execution model of DESIGN.md wired to PostgreSQL:

- :meth:`Execution.start_run` inserts the run and starts it in one transaction (trigger
  step completed, control steps evaluated inline, action steps made ready), then
  dispatches the ready action steps after commit.
- :meth:`Execution.execute_step` claims an attempt with a lease and a fencing token,
  runs the connector outside any transaction, and completes with a conditional update:
  a late or duplicate completion is discarded, so a step completes exactly once.
- :meth:`Execution.sweep` re-dispatches ready steps whose job was lost, expires leases of
  dead workers and starts queued runs; Redis may lose anything, PostgreSQL holds the truth.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Attempt, Run, StepRun, WorkflowVersion
from backend.db.run_store import (
    claim_attempt,
    create_child,
    extend_lease,
    finish_attempt,
    load_state,
    lock_run,
    save_state,
)
from backend.engine import orchestrator
from backend.engine.expressions import ExpressionError, resolve_config
from backend.engine.model import RunState
from backend.engine.nodes.calls import CALL_TYPES
from backend.engine.nodes.waits import TIMER_TYPES
from backend.engine.ports import Clock, ConnectorRegistry, Dispatcher, SystemClock
from backend.engine.states import RunStatus, StepStatus
from backend.services.graphs import graph_for_version
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
    """

    dispatch: list[tuple[str, float | None]] = field(default_factory=list)
    start_children: list[str] = field(default_factory=list)
    cancel_children: list[str] = field(default_factory=list)
    wake_parent: str | None = None


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


class RunNotActive(ValueError):
    """The run is not in a state that allows the request (e.g. resume a running run)."""


def worker_name() -> str:
    """``host:pid`` of this process, recorded on attempts."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Execution:
    """Execution service; one per process.

    ``context_factory(info: dict) -> context`` builds the connector SDK's action context
    (kept outside so this module does not depend on the SDK). ``lease_seconds`` is the
    attempt lease; a heartbeat renews it every third of it.
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
    ) -> None:
        self.sessionmaker = sessionmaker
        self.dispatcher = dispatcher
        self.registry = registry
        self.context_factory = context_factory
        self.clock = clock or SystemClock()
        self.lease_seconds = lease_seconds
        self.worker = worker_name()

    # -- start -----------------------------------------------------------------------

    async def start_run(
        self,
        version: WorkflowVersion,
        input: Any,
        *,
        trigger: str,
        idempotency_key: str | None = None,
        user_id: uuid.UUID | None = None,
    ) -> StartedRun:
        """Store and start a run of ``version`` with ``input`` (JSON-able).

        With ``idempotency_key``, a second call with the same key returns the first run
        (``created=False``) instead of starting another.
        """
        now = self.clock.now()
        run_id = uuid.uuid4()
        try:
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
                )
                session.add(run)
                await session.flush()
                graph = await graph_for_version(session, version.id)
                state = await load_state(session, run)
                state.emit("run.created", trigger=trigger)
                dispatch = orchestrator.start(graph, state, now)
                followup = await self._persist(session, run, state, graph, dispatch, now)
                status = run.status
        except IntegrityError:
            if idempotency_key is None:
                raise
            async with self.sessionmaker() as session:
                existing = (
                    await session.execute(select(Run).where(Run.idempotency_key == idempotency_key))
                ).scalar_one()
                return StartedRun(existing.id, existing.status, False)
        await self._after_commit(run_id, followup)
        return StartedRun(run_id, status, True)

    async def _persist(
        self,
        session: AsyncSession,
        run: Run,
        state: RunState,
        graph: WorkflowGraph,
        dispatch: list[str],
        now: Any,
    ) -> Followup:
        """Create the child runs the engine asked for, save the state, say what follows.

        Child runs are inserted in the caller's transaction (with the parent's step
        change), so a crash never leaves a waiting step without its child or vice versa.
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
        await save_state(session, run, state)
        for step_id in dict.fromkeys(dispatch):
            rec = state.steps.get(step_id)
            delay = None
            if rec is not None and rec.not_before is not None and rec.not_before > now:
                delay = (rec.not_before - now).total_seconds()
            followup.dispatch.append((step_id, delay))
        if run.parent_run_id is not None and state.status.terminal:
            followup.wake_parent = str(run.parent_run_id)
        return followup

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
        await self.dispatcher.notify(str(run_id))

    # -- advance ---------------------------------------------------------------------

    async def advance_run(self, run_id: uuid.UUID) -> None:
        """Advance a run (used after recovery and by the sweeper); starts a queued run."""
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            run = await lock_run(session, run_id)
            if run is None:
                return
            graph = await graph_for_version(session, run.version_id)
            state = await load_state(session, run)
            if state.status == RunStatus.QUEUED:
                dispatch = orchestrator.start(graph, state, now)
            else:
                dispatch = orchestrator.advance(graph, state, now)
            followup = await self._persist(session, run, state, graph, dispatch, now)
        await self._after_commit(run_id, followup)

    async def pause_run(self, run_id: uuid.UUID) -> None:
        """Pause a running or waiting run: nothing new starts; running attempts finish.

        Raises :class:`RunNotFound` or :class:`RunNotActive` (the run is not running or
        waiting).
        """
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            run = await lock_run(session, run_id)
            if run is None:
                raise RunNotFound(str(run_id))
            state = await load_state(session, run)
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
            run = await lock_run(session, run_id)
            if run is None:
                raise RunNotFound(str(run_id))
            state = await load_state(session, run)
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
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            run = await lock_run(session, run_id)
            if run is None:
                raise RunNotFound(str(run_id))
            state = await load_state(session, run)
            if state.status.terminal:
                return False
            orchestrator.cancel(state, now, reason)
            await session.execute(
                update(Attempt)
                .where(Attempt.run_id == run_id, Attempt.status == "running")
                .values(status="cancelled", finished_at=now)
            )
            followup = Followup(cancel_children=state.child_cancels)
            state.child_cancels = []
            await save_state(session, run, state)
            if run.parent_run_id is not None:
                followup.wake_parent = str(run.parent_run_id)
        await self._after_commit(run_id, followup)
        return True

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
            info = {
                "run_id": str(run_id),
                "workflow_id": claimed.workflow_id,
                "step_id": claimed.step_id,
                "attempt": claimed.number,
                "idempotency_key": claimed.idempotency_key,
                "node_type": claimed.node_type,
            }
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
            if step.type in TIMER_TYPES:
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
        save: bool = True,
    ) -> tuple[_Claimed | None, Followup]:
        """Resolve the config and claim an attempt, or fail the step on an expression
        error (then ``None`` and what follows the failure, already saved). With
        ``save=False`` a successful claim is left for the caller to save."""
        step = graph.step(step_id)
        rec = state.steps[step_id]
        try:
            config = resolve_config(
                step.config, step.expressions, rec.input, orchestrator.bindings(graph, state)
            )
        except ExpressionError as exc:
            rec.attempts += 1
            error = {"message": str(exc), "kind": "expression_error"}
            dispatch, _ = orchestrator.fail_action(
                graph, state, step_id, error, now, retryable=False
            )
            return None, await self._persist(session, run, state, graph, dispatch, now)
        else:
            attempt = await claim_attempt(
                session,
                run,
                state,
                step_id,
                worker=self.worker,
                input=rec.input,
                config=config,
                now=now,
                lease_until=now + timedelta(seconds=self.lease_seconds),
                save=save,
            )
            claimed = _Claimed(
                attempt.id,
                attempt.fencing_token,
                attempt.number,
                attempt.idempotency_key,
                rec.input,
                config,
                step_id=step_id,
                node_type=step.type,
                timeout=step.timeout,
                workflow_id=str(run.workflow_id),
            )
            return claimed, Followup()

    async def _run_action(
        self,
        node_type: str,
        config: dict[str, Any],
        input: Any,
        info: dict[str, Any],
        attempt_id: int,
        token: str,
        timeout: float | None,
    ) -> dict[str, Any]:
        runner = self.registry.action(node_type)
        if runner is None:
            return _failure(f"no installed connector provides {node_type}", "unknown_node_type")
        cancelled = asyncio.Event()

        async def heartbeat(_details: Any = None) -> None:
            async with self.sessionmaker() as session, session.begin():
                until = self.clock.now() + timedelta(seconds=self.lease_seconds)
                if not await extend_lease(session, attempt_id, token, until):
                    cancelled.set()

        async def beat_forever() -> None:
            while True:
                await asyncio.sleep(self.lease_seconds / 3)
                await heartbeat()

        context = self.context_factory(info, heartbeat, cancelled.is_set)
        beater = asyncio.create_task(beat_forever())
        try:
            output = await asyncio.wait_for(runner.run(config, input, context), timeout)
            return {"ok": True, "output": output}
        except TimeoutError:
            return _failure(f"step timed out after {timeout} s", "timeout", retryable=True)
        except Exception as exc:  # connector errors become step errors, never crash the worker
            return _error_from_exception(exc)
        finally:
            beater.cancel()

    async def _complete(
        self, run_id: uuid.UUID, done: _Claimed, outcome: dict[str, Any]
    ) -> _Claimed | None:
        """Record the outcome of attempt ``done`` and advance the run, in one transaction.

        When that makes exactly one action step ready now, the same transaction claims it
        (the run row stays locked throughout, so no other worker can claim it) and it is
        returned for this worker to run; everything else is dispatched after commit.
        """
        now = self.clock.now()
        async with self.sessionmaker() as session, session.begin():
            run = await lock_run(session, run_id)
            if run is None:
                return None
            ok = await finish_attempt(
                session,
                done.attempt_id,
                done.token,
                status="succeeded" if outcome["ok"] else "failed",
                output=outcome.get("output"),
                error=outcome.get("error"),
                now=now,
            )
            if not ok:
                log.info("discarded late completion of %s/%s", run_id, done.step_id)
                return None
            graph = await graph_for_version(session, run.version_id)
            state = await load_state(session, run, children=has_calls(graph))
            rec = state.steps.get(done.step_id)
            if state.status.terminal or rec is None or rec.status != StepStatus.RUNNING:
                return None
            if outcome["ok"]:
                dispatch = orchestrator.complete_action(
                    graph, state, done.step_id, outcome["output"], now
                )
            else:
                dispatch, delay = orchestrator.fail_action(
                    graph,
                    state,
                    done.step_id,
                    outcome["error"],
                    now,
                    retryable=outcome["retryable"],
                    retry_after=outcome.get("retry_after"),
                )
                if delay is not None:
                    dispatch = [done.step_id]
            claimed: _Claimed | None = None
            inline = _inline_candidate(graph, state, dispatch, now)
            if inline is None:
                followup = await self._persist(session, run, state, graph, dispatch, now)
            else:  # claim first, then write both changes with one save
                claimed, followup = await self._claim(
                    session, run, state, graph, inline, now, save=False
                )
                if claimed is not None:
                    followup = await self._persist(session, run, state, graph, [], now)
        await self._after_commit(run_id, followup)
        return claimed

    # -- recovery --------------------------------------------------------------------

    async def sweep(self, *, grace_seconds: float = 5.0) -> dict[str, int]:
        """One recovery pass. Returns counts: ``expired``, ``redispatched``, ``started``,
        ``woken``.

        - running attempts whose lease ran out are expired and their step made ready again
          (a lost worker is not the step's failure, so it does not use up retries);
        - ready steps due for longer than ``grace_seconds`` are dispatched again (a lost job);
        - queued runs older than ``grace_seconds`` are advanced (child runs included);
        - parents whose calling step still runs although a child ended more than
          ``grace_seconds`` ago are advanced (a lost wake-up job).
        Due durable timers are ready steps, so the second rule fires them.
        """
        now = self.clock.now()
        grace = now - timedelta(seconds=grace_seconds)
        counts = {"expired": 0, "redispatched": 0, "started": 0, "woken": 0}
        async with self.sessionmaker() as session:
            expired = (
                await session.execute(
                    select(Attempt.id, Attempt.run_id, Attempt.step_id, Attempt.fencing_token)
                    .where(Attempt.status == "running", Attempt.lease_expires_at < now)
                    .limit(500)
                )
            ).all()
        for attempt_id, run_id, step_id, token in expired:
            async with self.sessionmaker() as session, session.begin():
                run = await lock_run(session, run_id)
                if run is None:
                    continue
                if not await finish_attempt(
                    session,
                    attempt_id,
                    token,
                    status="expired",
                    output=None,
                    error={"message": "lease expired: worker lost", "kind": "lease_expired"},
                    now=now,
                ):
                    continue
                state = await load_state(session, run)
                rec = state.steps.get(step_id)
                if (
                    rec is not None
                    and rec.status == StepStatus.RUNNING
                    and not state.status.terminal
                ):
                    rec.move(StepStatus.READY)
                    rec.not_before = now
                    state.touch(step_id)
                    state.emit("step.lease_expired", step_id, attempt_id=attempt_id)
                    await save_state(session, run, state)
                counts["expired"] += 1
            await self.dispatcher.dispatch_step(str(run_id), step_id)
        async with self.sessionmaker() as session:
            ready = (
                await session.execute(
                    select(StepRun.run_id, StepRun.step_id)
                    .join(Run, Run.id == StepRun.run_id)
                    .where(
                        StepRun.status == StepStatus.READY.value,
                        StepRun.not_before < grace,
                        Run.status.in_([RunStatus.RUNNING.value, RunStatus.WAITING.value]),
                    )
                    .limit(1000)
                )
            ).all()
            queued = (
                (
                    await session.execute(
                        select(Run.id)
                        .where(Run.status == RunStatus.QUEUED.value, Run.created_at < grace)
                        .limit(1000)
                    )
                )
                .scalars()
                .all()
            )
            waiting_parents = (
                (
                    await session.execute(
                        select(Run.parent_run_id)
                        .join(
                            StepRun,
                            (StepRun.run_id == Run.parent_run_id)
                            & (StepRun.step_id == Run.parent_step_id),
                        )
                        .where(
                            Run.status.in_([s.value for s in RunStatus if s.terminal]),
                            Run.finished_at < grace,
                            StepRun.status == StepStatus.RUNNING.value,
                        )
                        .distinct()
                        .limit(1000)
                    )
                )
                .scalars()
                .all()
            )
        for run_id, step_id in ready:
            await self.dispatcher.dispatch_step(str(run_id), step_id)
            counts["redispatched"] += 1
        for parent_id in waiting_parents:
            await self.dispatcher.dispatch_advance(str(parent_id))
            counts["woken"] += 1
        for run_id in queued:
            await self.dispatcher.dispatch_advance(str(run_id))
            counts["started"] += 1
        return counts

    async def load_run_state(self, run_id: uuid.UUID) -> RunState:
        """Read-only snapshot of a run's state (no lock)."""
        async with self.sessionmaker() as session:
            run = await session.get(Run, run_id)
            if run is None:
                raise RunNotFound(str(run_id))
            return await load_state(session, run)


def has_calls(graph: WorkflowGraph) -> bool:
    """True when ``graph`` has a Sub-workflow or For-each step (its runs may have children)."""
    return any(step.type in CALL_TYPES for step in graph.steps)


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


def _failure(message: str, kind: str, *, retryable: bool = False) -> dict[str, Any]:
    return {"ok": False, "error": {"message": message, "kind": kind}, "retryable": retryable}


def _error_from_exception(exc: BaseException) -> dict[str, Any]:
    """Map an SDK error (duck-typed: ``kind``, ``retryable``, ``retry_after``) to an outcome."""
    kind = getattr(exc, "kind", None) or type(exc).__name__
    retryable = bool(getattr(exc, "retryable", False))
    error: dict[str, Any] = {"message": str(exc) or type(exc).__name__, "kind": kind}
    details = getattr(exc, "details", None)
    if details:
        error["details"] = details
    outcome: dict[str, Any] = {"ok": False, "error": error, "retryable": retryable}
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        outcome["retry_after"] = float(retry_after)
    return outcome
