"""The pure changes of step execution, computed over a run state (no I/O): claiming an
attempt (:func:`claim_attempt`, :func:`claim_change`) and completing one
(:func:`completion`). Both write paths of
:meth:`backend.services.runs.execution.steps.Steps.complete` write what :func:`completion`
computes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from backend.engine import orchestrator
from backend.engine.expressions import ExpressionError, resolve_config
from backend.engine.model import RunState
from backend.engine.outcomes import AttemptFailed, AttemptOutcome, AttemptSucceeded
from backend.engine.ports import FinishedAttempt, NewAttempt, RunRow
from backend.engine.states import StepStatus
from backend.services.runs.execution.transition import Change
from designer_schema.graph import WorkflowGraph


@dataclass
class Claimed:
    """An attempt this worker claimed and is about to run, with the run state as this
    worker wrote it with the claim and the revision that write gave the run (completing
    the attempt starts from that state while the revision has not moved)."""

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
    revision: int | None = None
    state: RunState | None = None
    node_version: int = 1  # the node-type version the step's graph pins
    workflow_version: int = 0  # the run's version number
    row: RunRow | None = None  # the run's row as read with the claim (its fixed fields)


def claim_attempt(
    state: RunState,
    step_id: str,
    *,
    run_id: uuid.UUID,
    worker: str,
    input: Any,
    config: Any,
    now: datetime,
    lease_until: datetime,
) -> NewAttempt:
    """Start a new attempt of ready step ``step_id`` in ``state`` and return it, to be
    written with the state (``start=``).

    The fencing token is random per attempt; completion must present it. The idempotency
    key ``<run id>:<step id>`` is the same for every attempt of the step.
    """
    rec = state.steps[step_id]
    rec.move(StepStatus.RUNNING)
    rec.attempts += 1
    rec.not_before = None
    if rec.started_at is None:
        rec.started_at = now
    state.touch(step_id)
    state.emit("step.started", step_id, attempt=rec.attempts, worker=worker)
    return NewAttempt(
        step_id=step_id,
        number=rec.attempts,
        fencing_token=uuid.uuid4().hex,
        idempotency_key=f"{run_id}:{step_id}",
        worker=worker,
        input=input,
        config=config,
        lease_expires_at=lease_until,
        started_at=now,
    )


def claim_change(
    graph: WorkflowGraph,
    state: RunState,
    step_id: str,
    run_id: uuid.UUID,
    now: datetime,
    worker: str,
    lease_seconds: float,
) -> Change:
    """Resolve ``step_id``'s config and claim an attempt of it (``Change.start``); or, on
    an expression error, fail the step (its retry policy does not apply: the same
    config would fail again). Pure over ``state``."""
    try:
        config = resolve(graph, state, step_id)
    except ExpressionError as exc:
        state.steps[step_id].attempts += 1
        error = {"message": str(exc), "kind": "expression_error"}
        dispatch, _ = orchestrator.fail_action(graph, state, step_id, error, now, retryable=False)
        return Change(dispatch=dispatch)
    attempt = claim_attempt(
        state,
        step_id,
        run_id=run_id,
        worker=worker,
        input=state.steps[step_id].input,
        config=config,
        now=now,
        lease_until=now + timedelta(seconds=lease_seconds),
    )
    return Change(start=attempt)


def completion(
    graph: WorkflowGraph,
    state: RunState,
    done: Claimed,
    outcome: AttemptOutcome,
    now: datetime,
    worker: str,
    lease_seconds: float,
    *,
    claim_next: bool = True,
) -> Change:
    """THE change of completing attempt ``done`` with ``outcome`` (pure over ``state``):
    the attempt closed, the outcome applied by the engine (success, retry or failure),
    and when exactly one action step became ready now, that step claimed (unless
    ``claim_next`` is False: a draining worker dispatches it instead). Both write paths of
    :meth:`Steps.complete` write what this computes."""
    dispatch = apply_outcome(graph, state, done, outcome, now)
    inline = inline_candidate(graph, state, dispatch, now) if claim_next else None
    if inline is None:
        change = Change(dispatch=dispatch)
    else:
        change = claim_change(
            graph, state, inline, uuid.UUID(state.run_id), now, worker, lease_seconds
        )
    change.finish = finished(done, outcome, now)
    return change


def is_current(state: RunState, done: Claimed) -> bool:
    """True while ``done`` is the current attempt of its step in an active run (not
    expired and re-claimed, not cancelled or timed out with the run)."""
    rec = state.steps.get(done.step_id)
    return (
        not state.status.terminal
        and rec is not None
        and rec.status == StepStatus.RUNNING
        and rec.attempts == done.number
    )


def apply_outcome(
    graph: WorkflowGraph, state: RunState, done: Claimed, outcome: AttemptOutcome, now: datetime
) -> list[str]:
    """Let the engine complete or fail ``done``'s step; the steps to dispatch (the step
    itself when it waits to be retried)."""
    dispatch, delay = orchestrator.record_outcome(graph, state, done.step_id, outcome, now)
    return [done.step_id] if delay is not None else dispatch


def resolve(graph: WorkflowGraph, state: RunState, step_id: str) -> dict[str, Any]:
    """The config of ``step_id`` with its expressions evaluated against the run state.

    Raises :class:`~backend.engine.expressions.ExpressionError`."""
    step = graph.step(step_id)
    bindings = orchestrator.bindings(graph, state)
    return resolve_config(step.config, step.expressions, state.steps[step_id].input, bindings)


def finished(done: Claimed, outcome: AttemptOutcome, now: datetime) -> FinishedAttempt:
    """The attempt row's closing values for ``outcome``."""
    return FinishedAttempt(
        done.attempt_id,
        done.token,
        status="succeeded" if isinstance(outcome, AttemptSucceeded) else "failed",
        output=outcome.output if isinstance(outcome, AttemptSucceeded) else None,
        error=outcome.error if isinstance(outcome, AttemptFailed) else None,
        finished_at=now,
    )


def inline_candidate(
    graph: WorkflowGraph, state: RunState, dispatch: list[str], now: datetime
) -> str | None:
    """The step to claim in the completing write: the only step to dispatch, when it is
    an action step due now and no child runs are being created (they may make more
    steps ready)."""
    if len(set(dispatch)) != 1 or state.child_requests:
        return None
    step_id = dispatch[0]
    rec = state.steps.get(step_id)
    if (
        orchestrator.behaviour_kind(graph.step(step_id)) != "action"
        or rec is None
        or rec.status != StepStatus.READY
    ):
        return None
    if rec.not_before is not None and rec.not_before > now:
        return None
    return step_id


def claimed_from(
    graph: WorkflowGraph,
    state: RunState,
    change: Change,
    row: RunRow | None,
    workflow_id: str | uuid.UUID,
    version_id: uuid.UUID,
) -> Claimed | None:
    """The attempt this process runs next (``change.start`` once written), with the run
    state as of that write (``change.revision`` its revision; ``row``: the run's row,
    ``None`` when unknown)."""
    attempt = change.start
    if attempt is None or attempt.id is None:
        return None
    step = graph.step(attempt.step_id)
    return Claimed(
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
        revision=change.revision,
        state=state,
        node_version=step.type_version,
        workflow_version=state.version_number,
        row=row,
    )
