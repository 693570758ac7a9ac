"""Step execution: claim an attempt, run the connector, complete the attempt.

- :meth:`Steps.claim` claims a ready action step with a lease and a fencing token (or
  fires a due timer): the claim decision (backend/services/runs/execution/decisions.py) taken
  on the run read without the lock, written by the run writer.
- :meth:`Steps.run_action` runs the connector outside any transaction
  (backend/services/runs/attempts.py), renewing the lease.
- :meth:`Steps.hand_back` releases an attempt stopped because the worker shuts down.
- :meth:`Steps.complete` records the outcome: the completion decision (the pure
  :func:`~backend.services.runs.execution.step_changes.completion`: outcome applied, the run
  advanced, and when exactly one action step became ready now, that step claimed for
  this worker) taken on the run as this worker wrote it with its claim, written by the
  run writer (backend/services/runs/execution/writer.py), which decides whether one statement
  fenced by that revision writes it or the run lock is needed (it then takes the same
  decision on the state it loads). A late or duplicate completion is discarded: a step
  completes exactly once. One late completion is recorded: the success of the attempt
  that was still running (its attempt open) when another branch's failure ended the run
  makes its cancelled step ``succeeded`` with its output, so a re-run or replay reuses it
  instead of calling it again (``orchestrator.succeed_after_end``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from backend.engine.outcomes import AttemptFailed, AttemptOutcome
from backend.engine.ports import ConnectorRegistry, HeldSteps, StaleAttempt
from backend.engine.states import AttemptStatus
from backend.observability import logs, tracing
from backend.services.runs.attempts import failure, run_attempt
from backend.services.runs.execution import decisions
from backend.services.runs.execution.step_changes import (
    Claimed,
    claim_attempt,
    claimed_from,
    completion,
)
from backend.services.runs.execution.transition import Change, Decide, Env, RunNotFound, RunView
from backend.services.runs.execution.writer import READ, OwnWrite, RunWriter
from connectors.sdk import ActionInfo

__all__ = ["Claimed", "Steps", "claim_attempt", "completion"]

log = logging.getLogger(__name__)


class Steps:
    """The step-execution use case (see the module doc). ``context_factory(info,
    heartbeat, is_cancelled)`` builds the connector SDK's action context."""

    def __init__(
        self,
        env: Env,
        writer: RunWriter,
        registry: ConnectorRegistry,
        context_factory: Any,
    ) -> None:
        self.env = env
        self.writer = writer
        self.registry = registry
        self.context_factory = context_factory

    async def execute_step(self, run_id: uuid.UUID, step_id: str) -> None:
        """Claim, run and complete one attempt of ``step_id`` (an arq job body).

        Safe to call twice for the same step: only a ``ready`` step can be claimed. When
        completing the step makes exactly one next action step ready now, the same write
        claims it and this worker runs it directly (no queue round trip, one commit per
        step transition; measured in bench/engine.py); other ready steps go through the
        dispatcher. A job also enqueued for a claimed step finds it claimed and stops.

        While the worker drains (backend/services/runs/draining.py) a job is not claimed but
        dispatched again for another worker, and an attempt stopped by the drain's hand-back
        is released (:meth:`hand_back`) instead of completed.
        """
        if self.env.drain.draining:
            await self.env.dispatcher.dispatch_step(str(run_id), step_id)
            return
        await self.run_claimed(run_id, await self.claim(run_id, step_id))

    async def run_claimed(self, run_id: uuid.UUID, claimed: Claimed | None) -> None:
        """Run attempt ``claimed`` of run ``run_id`` and complete it, then the attempt
        each completion claims for this process, until none is (the step loop of a
        worker's job and of an eager run: backend/services/runs/execution/eager.py)."""
        drain = self.env.drain
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
            logs.bind(step_id=claimed.step_id)
            with tracing.step_span(info) as current:
                outcome = await self.run_action(claimed, info)
                failed = isinstance(outcome, AttemptFailed)
                tracing.set_attributes(current, outcome="failed" if failed else "succeeded")
            if failed and drain.handed_back(claimed.attempt_id):
                await self.hand_back(run_id, claimed)
                return
            claimed = await self.complete(run_id, claimed, outcome)

    async def claim(self, run_id: uuid.UUID, step_id: str) -> Claimed | None:
        """Claim ready action ``step_id`` (or fire it when it is a due timer); ``None``
        when there is nothing for this worker to run."""
        decide = decisions.claim(step_id, self.env.worker, self.env.lease_seconds)
        try:
            change = await self.writer.apply(run_id, decide, basis=READ)
        except RunNotFound:
            return None
        return self._claimed(change)

    async def run_action(self, claimed: Claimed, info: ActionInfo) -> AttemptOutcome:
        """Run one attempt (backend/services/runs/attempts.py) with the connector action of
        the node-type version the step pins, renewing its lease in PostgreSQL while it
        runs and stopping it at once when its run ends (``Env.cancel_watch``); returns
        the outcome."""
        runner = self.registry.action(claimed.node_type, info.node_version)
        refresh = getattr(self.registry, "refresh", None)
        if runner is None and refresh is not None:  # imported by another process since
            await refresh()
            runner = self.registry.action(claimed.node_type, info.node_version)
        if runner is None:
            return failure(
                f"no installed connector provides {claimed.node_type}", "unknown_node_type"
            )

        async def renew_lease() -> bool:
            until = self.env.clock.now() + timedelta(seconds=self.env.lease_seconds)
            return await self.env.store.extend_lease(claimed.attempt_id, claimed.token, until)

        def stop_hook(stop: Callable[[], None]) -> Callable[[], None]:
            unwatch = self.env.cancel_watch.register(info.run_id, stop)
            undrain = self.env.drain.register(claimed.attempt_id, stop)

            def unregister() -> None:
                unwatch()
                undrain()

            return unregister

        return await run_attempt(
            runner,
            claimed.config,
            claimed.input,
            lambda heartbeat, is_cancelled: self.context_factory(info, heartbeat, is_cancelled),
            renew_lease=renew_lease,
            heartbeat_every=self.env.lease_seconds / 3,
            timeout=claimed.timeout,
            stop_hook=stop_hook,
        )

    async def complete(
        self, run_id: uuid.UUID, done: Claimed, outcome: AttemptOutcome
    ) -> Claimed | None:
        """Record the outcome of attempt ``done`` and advance the run; returns the next
        attempt this worker runs (see the module doc), else ``None``."""
        basis, held = None, None
        if done.state is not None and done.revision is not None:
            held = HeldSteps(done.revision, done.state.steps, done.state.stored)
            if done.row is not None:
                basis = OwnWrite(done.row, done.state, done.revision)
        done.state = None  # the decision edits it: never reused
        decide = decisions.complete(
            done,
            outcome,
            self.env.worker,
            self.env.lease_seconds,
            claim_next=not self.env.drain.draining,
        )
        try:
            change = await self.writer.apply(run_id, decide, basis=basis, held=held)
        except (StaleAttempt, RunNotFound):
            change = None
        if change is None or change.closed is False:
            log.info("discarded late completion of %s/%s", run_id, done.step_id)
        return self._claimed(change)

    def _claimed(self, change: Change | None) -> Claimed | None:
        """The attempt a written change claimed for this worker (``None``: none)."""
        if change is None or not isinstance(change.result, RunView):
            return None
        run = change.result
        return claimed_from(
            run.graph, run.state, change, run.row, run.row.workflow_id, run.row.version_id
        )

    async def expire_lease(
        self, run_id: uuid.UUID, step_id: str, attempt_id: int, token: str
    ) -> bool:
        """Expire a running attempt whose lease ran out (its worker is lost): the step
        is ready again without using up a retry, or fails (kind ``lease_expired``) once its
        workers were lost :data:`~backend.engine.unfinished_attempts.MAX_LOST_LEASES` times.
        False when the attempt was no longer running with ``token``."""
        error = {"message": "lease expired: worker lost", "kind": "lease_expired"}
        expired = AttemptStatus.EXPIRED
        return await self._reopen(
            run_id, decisions.reopen(step_id, attempt_id, token, expired, error, lost=True)
        )

    async def hand_back(self, run_id: uuid.UUID, claimed: Claimed) -> bool:
        """Release attempt ``claimed``, stopped because this worker is shutting down
        (backend/services/runs/draining.py): the attempt is closed as ``released`` (kind
        ``worker_shutdown``) and its step is ready again and dispatched at once (like a
        lease expiry). False when the attempt was no longer current (its run ended)."""
        error = {
            "message": "handed back: the worker was shutting down",
            "kind": "worker_shutdown",
        }
        released = AttemptStatus.RELEASED
        decide = decisions.reopen(
            claimed.step_id, claimed.attempt_id, claimed.token, released, error, lost=False
        )
        if await self._reopen(run_id, decide):
            log.info("handed back %s/%s at shutdown", run_id, claimed.step_id)
            return True
        return False

    async def _reopen(self, run_id: uuid.UUID, decide: Decide) -> bool:
        """Apply ``decide``, a :func:`~backend.services.runs.execution.decisions.reopen` of a
        running attempt; False when the attempt was not open (or the run is gone)."""
        try:
            change = await self.writer.apply(run_id, decide)
        except (RunNotFound, StaleAttempt):
            return False
        return bool(change is not None and change.result)
