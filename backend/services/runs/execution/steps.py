"""Step execution: claim an attempt, run the connector, complete the attempt.

- :meth:`Steps.claim` claims a ready action step with a lease and a fencing token (or
  fires a due timer): ``Transitions.optimistic``, the locked decision on an unlocked read.
- :meth:`Steps.run_action` runs the connector outside any transaction
  (backend/services/runs/attempts.py), renewing the lease.
- :meth:`Steps.hand_back` releases an attempt stopped because the worker shuts down.
- :meth:`Steps.complete` records the outcome. The change is computed by ONE pure
  function, :func:`completion` (outcome applied, the run advanced, and when exactly one
  action step became ready now, that step claimed for this worker). It is written by
  the fast path, one autocommit statement fenced by the run revision this worker wrote
  with its claim, or, when the run moved since or the change needs more than that
  statement (child runs, the run failing), by the locked path, which recomputes it with
  the same function from the state it loads (the pure changes live in
  backend/services/runs/execution/step_changes.py). A late or duplicate completion is
  discarded: a step completes exactly once. One late completion is recorded: the success
  of the attempt that was still running (its attempt open) when another branch's failure
  ended the run makes its cancelled step ``succeeded`` with its output, so a re-run or
  replay reuses it instead of calling it again (``orchestrator.succeed_after_end``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from backend.engine import orchestrator, step_timeouts
from backend.engine.outcomes import AttemptFailed, AttemptOutcome, AttemptSucceeded
from backend.engine.ports import (
    ConnectorRegistry,
    FinishedAttempt,
    HeldSteps,
    StaleAttempt,
)
from backend.engine.states import AttemptStatus, RunStatus, StepStatus
from backend.observability import logs, tracing
from backend.services.runs.attempts import failure, run_attempt
from backend.services.runs.execution.followups import Followups
from backend.services.runs.execution.step_changes import (
    Claimed,
    claim_attempt,
    claim_change,
    claimed_from,
    completion,
    finished,
    is_current,
)
from backend.services.runs.execution.transition import (
    Change,
    Env,
    Followup,
    Locked,
    RunNotFound,
    Transitions,
    dispatch_entries,
    ends_unlocked,
    has_calls,
    needs_lock,
)
from connectors.sdk import ActionInfo

__all__ = ["Claimed", "Steps", "claim_attempt", "completion"]

log = logging.getLogger(__name__)


class Steps:
    """The step-execution use case (see the module doc). ``context_factory(info,
    heartbeat, is_cancelled)`` builds the connector SDK's action context."""

    def __init__(
        self,
        env: Env,
        transitions: Transitions,
        followups: Followups,
        registry: ConnectorRegistry,
        context_factory: Any,
    ) -> None:
        self.env = env
        self.transitions = transitions
        self.followups = followups
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
        worker, lease = self.env.worker, self.env.lease_seconds

        async def decide(run: Locked) -> Change | None:
            state, now = run.state, run.now
            if state.status.terminal or state.status == RunStatus.PAUSED:
                return None
            expired = step_timeouts.expire(run.graph, state, step_id, now)
            if expired is not None:  # a timer or call step's own timeout
                error = {"message": expired, "kind": "timeout"}
                dispatch, _ = orchestrator.fail_action(
                    run.graph, state, step_id, error, now, retryable=False
                )
                return Change(dispatch=dispatch)
            rec = state.steps.get(step_id)
            if rec is None or rec.status != StepStatus.READY:
                return None
            if rec.not_before is not None and rec.not_before > now:
                return Change(dispatch=[step_id])  # early: dispatched again for its time
            kind = orchestrator.behaviour_kind(run.graph.step(step_id))
            if kind == "inline":
                # an inline step left ready by a start that spent its budget
                return Change(dispatch=orchestrator.advance(run.graph, state, now))
            if kind == "timer":
                return Change(dispatch=orchestrator.fire_timer(run.graph, state, step_id, now))
            change = claim_change(run.graph, state, step_id, run.row.id, now, worker, lease)
            change.result = run
            return change

        try:
            change = await self.transitions.optimistic(run_id, decide)
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
        if done.state is not None:
            written = await self._complete_unlocked(run_id, done, outcome)
            if written is not _MOVED:
                return written if isinstance(written, Claimed) else None
        return await self._complete_locked(run_id, done, outcome)

    async def _complete_unlocked(
        self, run_id: uuid.UUID, done: Claimed, outcome: AttemptOutcome
    ) -> Claimed | object | None:
        """The fast path: :func:`completion` from the state this worker wrote with the
        claim, written by ONE autocommit statement only if the run is still at that
        revision (docs/engine.md, "Performance"). ``_MOVED`` (nothing written) when the
        run changed since, or the change needs the locked path."""
        graph = self.env.store.cached_graph(done.version_id)
        state = done.state
        if state is None or graph is None or has_calls(graph) or not is_current(state, done):
            return _MOVED
        done.state = None  # changed below: the locked path must not reuse it
        now = self.env.clock.now()
        change = completion(
            graph,
            state,
            done,
            outcome,
            now,
            self.env.worker,
            self.env.lease_seconds,
            claim_next=not self.env.drain.draining,
        )
        if needs_lock(state) and not ends_unlocked(state, done.row):
            return _MOVED
        written = await self.env.store.write_unlocked(
            run_id,
            state,
            finish=change.finish,
            start=change.start,
            expected_revision=done.revision or 0,
        )
        if written.revision is None:
            if written.moved:
                return _MOVED
            log.info("discarded late completion of %s/%s", run_id, done.step_id)
            return None
        change.revision = written.revision
        followup = Followup(dispatch=dispatch_entries(state, change.dispatch, now))
        if state.status.terminal and done.row is not None:
            await self.followups.after_unlocked_end(done.row, state, followup, written.settings)
        await self.followups.after_commit(str(run_id), followup, state)
        return claimed_from(graph, state, change, done.row, done.workflow_id, done.version_id)

    async def _complete_locked(
        self, run_id: uuid.UUID, done: Claimed, outcome: AttemptOutcome
    ) -> Claimed | None:
        """The locked path: the same :func:`completion` under the run lock; a
        completion that lost its lease (token refused) writes nothing."""
        held = None
        if done.state is not None and done.revision is not None:
            held = HeldSteps(done.revision, done.state.steps)
        worker, lease = self.env.worker, self.env.lease_seconds

        async def decide(run: Locked) -> Change:
            if not is_current(run.state, done):
                if isinstance(outcome, AttemptSucceeded) and orchestrator.succeed_after_end(
                    run.state, done.step_id, done.number, outcome.output, run.now
                ):
                    # the run ended while the call ran, and it completed: the step shows
                    # it (written with the attempt's fenced close, so only if still open)
                    return Change(finish=finished(done, outcome, run.now))
                # no longer the step's current attempt: close it if still open, discard
                if not await run.tx.close_attempt(finished(done, outcome, run.now)):
                    log.info("discarded late completion of %s/%s", run_id, done.step_id)
                return Change(write=False)
            change = completion(
                run.graph,
                run.state,
                done,
                outcome,
                run.now,
                worker,
                lease,
                claim_next=not self.env.drain.draining,
            )
            change.result = run
            return change

        try:
            change = await self.transitions.locked(run_id, decide, held=held)
        except (StaleAttempt, RunNotFound):
            log.info("discarded late completion of %s/%s", run_id, done.step_id)
            return None
        return self._claimed(change)

    def _claimed(self, change: Change | None) -> Claimed | None:
        """The attempt a locked transition claimed for this worker (``None``: none)."""
        if change is None or not isinstance(change.result, Locked):
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
        return await self._reopen(
            run_id, step_id, attempt_id, token, AttemptStatus.EXPIRED, error, lost=True
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
        released = await self._reopen(
            run_id,
            claimed.step_id,
            claimed.attempt_id,
            claimed.token,
            AttemptStatus.RELEASED,
            error,
            lost=False,
        )
        if released:
            log.info("handed back %s/%s at shutdown", run_id, claimed.step_id)
        return released

    async def _reopen(
        self,
        run_id: uuid.UUID,
        step_id: str,
        attempt_id: int,
        token: str,
        status: AttemptStatus,
        error: dict[str, Any],
        *,
        lost: bool,
    ) -> bool:
        """Close running attempt ``attempt_id`` (fenced by ``token``) with ``status`` and
        ``error`` and reopen its step (:func:`backend.engine.orchestrator.reopen_attempt`:
        ready again at once without using up a retry, or failed after too many lost
        workers); False when the attempt was not open."""

        async def decide(run: Locked) -> Change:
            closed = FinishedAttempt(attempt_id, token, status.value, None, error, run.now)
            if not await run.tx.close_attempt(closed):
                return Change(result=False, write=False)
            dispatch = orchestrator.reopen_attempt(
                run.graph, run.state, step_id, attempt_id, run.now, lost=lost
            )
            return Change(dispatch=dispatch, result=True)

        try:
            change = await self.transitions.locked(run_id, decide)
        except RunNotFound:
            return False
        return bool(change is not None and change.result)


class _Moved:
    """Marker: the run moved since the worker's own write; complete under the lock."""


_MOVED = _Moved()
