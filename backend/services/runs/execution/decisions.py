"""The decisions of run control and step execution, each a pure function of a run.

Each function returns a :data:`~backend.services.runs.execution.transition.Decide`: given
the run (:class:`~backend.services.runs.execution.transition.RunView`) it edits the run's
state through the pure engine and returns one
:class:`~backend.services.runs.execution.transition.Change`, or ``None`` (nothing to do). No
I/O: what needs the database (closing an attempt, cancelling running attempts, the audit
row) is a field of the change, applied by the run writer
(backend/services/runs/execution/writer.py), which also chooses how the change is written.
The start's decision is the start use case's (backend/services/runs/execution/starts.py);
the claim's and completion's pure changes are in step_changes.py.
"""

from __future__ import annotations

from typing import Any

from backend.engine import orchestrator, step_timeouts
from backend.engine.outcomes import AttemptOutcome, AttemptSucceeded
from backend.engine.ports import AuditHook, FinishedAttempt
from backend.engine.states import AttemptStatus, RunStatus, StepStatus
from backend.services.runs.execution.step_changes import (
    Claimed,
    claim_change,
    completion,
    finished,
    is_current,
)
from backend.services.runs.execution.transition import Change, Decide, RunNotActive, RunView


def advance() -> Decide:
    """Advance the run: inline steps evaluated, the steps that became ready dispatched."""

    def decide(run: RunView) -> Change:
        return Change(dispatch=orchestrator.advance(run.graph, run.state, run.now))

    return decide


def claim(step_id: str, worker: str, lease_seconds: float) -> Decide:
    """Claim ready action ``step_id`` for ``worker`` with a lease of ``lease_seconds``
    (``Change.result``: the run decided on), fire it when it is a due timer, fail it when
    its own timeout passed; ``None`` when there is nothing to run (the run ended or is
    paused, the step is not ready)."""

    def decide(run: RunView) -> Change | None:
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
        change = claim_change(run.graph, state, step_id, run.row.id, now, worker, lease_seconds)
        change.result = run
        return change

    return decide


def complete(
    done: Claimed,
    outcome: AttemptOutcome,
    worker: str,
    lease_seconds: float,
    *,
    claim_next: bool,
) -> Decide:
    """Complete attempt ``done`` with ``outcome`` (success, retry or failure: the pure
    :func:`~backend.services.runs.execution.step_changes.completion`; ``Change.result``: the
    run decided on). An attempt that is no longer its step's current one is closed if
    still open and discarded (``Change.close``), except the success of an attempt that
    was still running when the run ended, which its cancelled step records
    (``orchestrator.succeed_after_end``: a re-run or replay reuses it)."""

    def decide(run: RunView) -> Change:
        if not is_current(run.state, done):
            if isinstance(outcome, AttemptSucceeded) and orchestrator.succeed_after_end(
                run.state, done.step_id, done.number, outcome.output, run.now
            ):
                return Change(finish=finished(done, outcome, run.now))
            return Change(close=finished(done, outcome, run.now), write=False)
        change = completion(
            run.graph,
            run.state,
            done,
            outcome,
            run.now,
            worker,
            lease_seconds,
            claim_next=claim_next,
        )
        change.result = run
        return change

    return decide


def reopen(
    step_id: str,
    attempt_id: int,
    token: str,
    status: AttemptStatus,
    error: dict[str, Any],
    *,
    lost: bool,
) -> Decide:
    """Close running attempt ``attempt_id`` (fenced by ``token``) with ``status`` and
    ``error`` and reopen its step (lost worker: ``lost``; handed back at shutdown): ready
    again without using up a retry, or failed after too many lost workers. The writer
    raises ``StaleAttempt`` when the attempt was no longer open."""

    def decide(run: RunView) -> Change:
        closed = FinishedAttempt(attempt_id, token, status.value, None, error, run.now)
        dispatch = orchestrator.reopen_attempt(
            run.graph, run.state, step_id, attempt_id, run.now, lost=lost
        )
        return Change(dispatch=dispatch, finish=closed, result=True)

    return decide


def pause(audit: AuditHook | None = None) -> Decide:
    """Pause a running or waiting run (nothing new starts; running attempts finish).
    Raises :class:`RunNotActive` otherwise."""

    def decide(run: RunView) -> Change:
        state = run.state
        if state.status not in (RunStatus.RUNNING, RunStatus.WAITING):
            raise RunNotActive(f"run is {state.status.value}; only active runs pause")
        state.move(RunStatus.PAUSED)
        state.emit("run.paused", at=run.now.isoformat())
        return Change(audit=audit)

    return decide


def resume(audit: AuditHook | None = None) -> Decide:
    """Resume a paused run: advance it and dispatch every ready step again. Raises
    :class:`RunNotActive` when the run is not paused."""

    def decide(run: RunView) -> Change:
        state = run.state
        if state.status != RunStatus.PAUSED:
            raise RunNotActive(f"run is {state.status.value}; only paused runs resume")
        state.move(RunStatus.RUNNING)
        state.emit("run.resumed")
        dispatch = orchestrator.advance(run.graph, state, run.now)
        dispatch += [
            sid
            for sid, rec in state.steps.items()
            if rec.status == StepStatus.READY and sid not in dispatch
        ]
        return Change(dispatch=dispatch, audit=audit)

    return decide


def cancel(reason: str, audit: AuditHook | None = None) -> Decide:
    """Cancel a run that has not ended (``Change.result`` True); an ended one is left as
    it is (``result`` False, nothing written)."""

    def decide(run: RunView) -> Change:
        if run.state.status.terminal:
            return Change(result=False, write=False)
        orchestrator.cancel(run.state, run.now, reason)
        return Change(result=True, cancel_attempts=True, audit=audit)

    return decide


def time_out() -> Decide:
    """End a run whose run timeout (``runs.deadline_at``) has passed: ``timed_out``
    (``result`` True); a run that ended or is not overdue is left (``result`` False)."""

    def decide(run: RunView) -> Change:
        row = run.row
        if run.state.status.terminal or row.deadline_at is None or row.deadline_at > run.now:
            return Change(result=False, write=False)
        seconds = (row.deadline_at - (row.started_at or row.created_at)).total_seconds()
        orchestrator.time_out(run.state, run.now, f"run timed out after {seconds:g} s")
        return Change(result=True, cancel_attempts=True)

    return decide


def fail(error: dict[str, Any]) -> Decide:
    """End a run that has not ended as ``failed`` with ``error`` (``result`` True)."""

    def decide(run: RunView) -> Change:
        if run.state.status.terminal:
            return Change(result=False, write=False)
        orchestrator.fail(run.state, run.now, error)
        return Change(result=True, cancel_attempts=True)

    return decide
