"""The execution facade: one object per process wiring the use cases to the ports."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any

from backend.engine.expression_slice import loop_slice
from backend.engine.ports import (
    Clock,
    ConnectorRegistry,
    Dispatcher,
    EventSink,
    RunStore,
    SystemClock,
)
from backend.observability import tracing
from backend.services.runs.cancellation import CancelWatch
from backend.services.runs.execution.control import Control
from backend.services.runs.execution.eager import EagerRuns
from backend.services.runs.execution.followups import Followups
from backend.services.runs.execution.starts import StartedRun, Starts, VersionRef
from backend.services.runs.execution.step_changes import Claimed
from backend.services.runs.execution.steps import Steps
from backend.services.runs.execution.transition import AuditHook, Env
from backend.services.runs.execution.writer import RunWriter
from backend.services.runs.recovery import Recovery, RecoveryQueries
from backend.services.runs.storable import UNSTORABLE_RUN_ERROR, refused_by_database

log = logging.getLogger(__name__)


def worker_name() -> str:
    """``host:pid`` of this process, recorded on attempts."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Execution:
    """Execution service; one per process.

    ``store`` persists runs; ``dispatcher`` sends work to workers (and is the event sink
    unless ``events`` is given); ``registry`` finds action runners; ``context_factory(info,
    heartbeat, is_cancelled) -> context`` builds the connector SDK's action context (kept
    outside so this package does not depend on the SDK); ``recovery_queries`` feed the
    sweeper. ``lease_seconds`` is the attempt lease (a heartbeat renews it every third of
    it); ``base_url`` (the public URL of the app) builds the run links handed to error
    workflows; ``eager_runs`` is the most runs this process executes itself at once
    (backend/services/runs/execution/eager.py; 0: none). The use cases are attributes:
    :attr:`starts`, :attr:`control`, :attr:`steps`, :attr:`recovery`; the methods below
    are the entry points the rest of Railyard calls.
    """

    def __init__(
        self,
        store: RunStore,
        dispatcher: Dispatcher,
        registry: ConnectorRegistry,
        context_factory: Any,
        *,
        recovery_queries: RecoveryQueries | None = None,
        events: EventSink | None = None,
        clock: Clock | None = None,
        lease_seconds: float = 60.0,
        base_url: str = "",
        eager_runs: int = 0,
    ) -> None:
        self.env = Env(
            store=store,
            dispatcher=dispatcher,
            events=events or dispatcher,
            clock=clock or SystemClock(),
            worker=worker_name(),
            lease_seconds=lease_seconds,
            base_url=base_url.rstrip("/"),
        )
        self.env.eager.limit = eager_runs
        # what the event service builds a trigger's context with (credentials, HTTP, SSRF)
        self.context_factory = context_factory
        self.followups = Followups(self.env)
        self.writer = RunWriter(self.env, self.followups)
        self.starts = Starts(self.env, self.writer)
        self.control = Control(self.env, self.writer, self.starts)
        self.steps = Steps(self.env, self.writer, registry, context_factory)
        self.recovery = Recovery(
            recovery_queries,
            self.env,
            timeout_run=self.control.timeout_run,
            expire_lease=self.steps.expire_lease,
            admit_queued=self.starts.admit_queued,
        )

    @property
    def clock(self) -> Clock:
        """The clock every use case reads (replaceable: tests drive a fake one)."""
        return self.env.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.env.clock = clock

    @property
    def eager(self) -> EagerRuns:
        """The runs this process executes itself (stop them with ``eager.stop(grace)``
        before closing the process's connections)."""
        return self.env.eager

    @property
    def dispatcher(self) -> Dispatcher:
        """The dispatcher work is sent through."""
        return self.env.dispatcher

    @property
    def cancel_watch(self) -> CancelWatch:
        """The attempts running in this process, stopped when their run ends (cancel
        notices from other processes arrive through backend/workers/run_control.py)."""
        return self.env.cancel_watch

    async def start_run(
        self,
        version: VersionRef,
        input: Any,
        *,
        trigger: str,
        idempotency_key: str | None = None,
        user_id: uuid.UUID | None = None,
        audit: AuditHook | None = None,
        run_id: uuid.UUID | None = None,
        eager: bool = False,
    ) -> StartedRun:
        """Store and start a run (:meth:`~backend.services.runs.execution.starts.Starts.start_run`);
        ``audit`` adds the start's audit row in the run's transaction; ``run_id`` is the
        new run's id when the caller chose it (a fresh UUID 4, e.g. to subscribe to its
        notices first). ``eager`` (the caller waits for the run's answer): the run's one
        ready action step may run in this process (:attr:`eager`). With tracing on this is
        the ``run.start`` span the run's jobs continue."""
        with tracing.span("run.start", attributes={"railyard.trigger": trigger}) as current:
            started = await self.starts.start_run(
                version,
                input,
                trigger=trigger,
                idempotency_key=idempotency_key,
                user_id=user_id,
                audit=audit,
                run_id=run_id,
                eager=eager,
            )
            if started.eager is not None:
                run = self._run_eager(started.run_id, started.eager)
                self.env.eager.spawn(run, str(started.run_id))
            tracing.set_attributes(
                current, run_id=started.run_id, workflow_id=getattr(version, "workflow_id", "")
            )
            return started

    async def _run_eager(self, run_id: uuid.UUID, claimed: Claimed) -> None:
        """An eager run's task: the worker's step loop from ``claimed``, its inline steps
        held to the event loop's slice (backend/engine/expression_slice.py). A change the
        database refuses to store fails the run (kind ``unstorable_value``) as in a
        worker's job; any other error is logged by the task and the step is recovered by
        the sweeper (its lease runs out)."""
        try:
            # the steps after its action are evaluated here too: one too long for the
            # event loop is left ready and a worker advances the run
            with loop_slice() as sliced:
                await self.steps.run_claimed(run_id, claimed)
            if sliced.deferred:
                await self.env.dispatcher.dispatch_advance(str(run_id))
        except Exception as exc:
            if not refused_by_database(exc):
                raise
            await self.fail_unstorable(run_id, exc)

    async def admit_queued(self, workflow_id: uuid.UUID) -> int:
        """Start queued runs of a workflow that fit its concurrency limit; how many."""
        return await self.starts.admit_queued(workflow_id)

    async def advance_run(self, run_id: uuid.UUID) -> None:
        """Advance a run, or start it when queued (an arq job body)."""
        await self.control.advance_run(run_id)

    async def pause_run(self, run_id: uuid.UUID, audit: AuditHook | None = None) -> None:
        """Pause a running or waiting run (:meth:`Control.pause_run`)."""
        await self.control.pause_run(run_id, audit)

    async def resume_run(self, run_id: uuid.UUID, audit: AuditHook | None = None) -> None:
        """Resume a paused run (:meth:`Control.resume_run`)."""
        await self.control.resume_run(run_id, audit)

    async def cancel_run(
        self, run_id: uuid.UUID, reason: str, audit: AuditHook | None = None
    ) -> bool:
        """Cancel a run; False when it had already ended (:meth:`Control.cancel_run`)."""
        return await self.control.cancel_run(run_id, reason, audit)

    async def timeout_run(self, run_id: uuid.UUID) -> bool:
        """Time out an overdue run (:meth:`Control.timeout_run`)."""
        return await self.control.timeout_run(run_id)

    async def fail_run(self, run_id: uuid.UUID, error: dict[str, Any]) -> bool:
        """Fail a run the database refuses to store (:meth:`Control.fail_run`)."""
        return await self.control.fail_run(run_id, error)

    async def fail_unstorable(self, run_id: uuid.UUID, exc: BaseException) -> bool:
        """Fail run ``run_id`` whose change PostgreSQL refused as a value it cannot store
        (``exc``, a data error: the same change would be refused on every retry) with
        :data:`~backend.services.runs.storable.UNSTORABLE_RUN_ERROR`, logging one line; False
        when the run had already ended. Used by a worker's job and an eager run alike."""
        log.warning("run %s failed: the database refused a value (%s)", run_id, type(exc).__name__)
        return await self.control.fail_run(run_id, dict(UNSTORABLE_RUN_ERROR))

    async def rerun(
        self,
        run_id: uuid.UUID,
        *,
        start_from: str,
        user_id: uuid.UUID | None = None,
        audit: AuditHook | None = None,
    ) -> StartedRun:
        """Start a run repeating an ended one (:meth:`Control.rerun`)."""
        return await self.control.rerun(run_id, start_from=start_from, user_id=user_id, audit=audit)

    async def replay(
        self,
        run_id: uuid.UUID,
        *,
        step_id: str,
        input: Any,
        user_id: uuid.UUID | None = None,
        audit: AuditHook | None = None,
    ) -> StartedRun:
        """Start a run repeating an ended one from ``step_id`` with its input edited
        (:meth:`Control.replay`)."""
        return await self.control.replay(
            run_id, step_id=step_id, input=input, user_id=user_id, audit=audit
        )

    async def execute_step(self, run_id: uuid.UUID, step_id: str) -> None:
        """Claim, run and complete a step (an arq job body; :meth:`Steps.execute_step`)."""
        await self.steps.execute_step(run_id, step_id)

    async def drain(self) -> None:
        """Wait for run-change announcements still being published (before closing Redis)."""
        await self.followups.drain()
