"""Orchestration: start a run, advance it, and record step outcomes, on in-memory state.

Every function here is pure over a :class:`~backend.engine.model.RunState` (plus a clock
value): the persistence layer loads the state with the run row locked, calls these, and
writes back ``state.changed`` / ``state.events`` in the same transaction. Action steps
returned by :func:`advance` are dispatched to workers after commit.

Data flow: a step's input is the output of its single activated predecessor; when several
predecessors arrived (a join), it is an object mapping each predecessor's step id to its
output. Expressions see that input as ``$`` and the bindings of :func:`bindings`.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from backend.engine.control import ControlError, evaluate_control
from backend.engine.model import RunState
from backend.engine.planner import activated_sources, plan
from backend.engine.retry import retry_delay, should_retry
from backend.engine.states import RunStatus, StepStatus
from designer_schema.graph import Step, WorkflowGraph

ON_ERROR_FAIL = "fail"
ON_ERROR_PORT = "error_port"
ON_ERROR_CONTINUE = "continue"


def bindings(graph: WorkflowGraph, state: RunState) -> dict[str, Any]:
    """Expression variables: ``$trigger``, ``$steps`` (id -> output) and ``$run``."""
    steps = {
        sid: rec.output
        for sid, rec in state.steps.items()
        if rec.status in (StepStatus.SUCCEEDED, StepStatus.FAILED)
    }
    return {
        "trigger": steps.get(graph.trigger),
        "steps": steps,
        "run": {
            "id": state.run_id,
            "workflow_id": state.workflow_id,
            "version": state.version_number,
        },
    }


def step_input(graph: WorkflowGraph, state: RunState, step_id: str) -> Any:
    """Input of ``step_id`` from its activated predecessors (see module docstring)."""
    sources = activated_sources(graph, step_id, state.steps)
    if len(sources) == 1:
        return state.steps[sources[0]].output
    return {sid: state.steps[sid].output for sid in sources}


def start(graph: WorkflowGraph, state: RunState, now: datetime) -> list[str]:
    """Start a queued run: complete the trigger step with the run input, then advance.

    Returns the action step ids to dispatch.
    """
    state.move(RunStatus.RUNNING)
    state.started_at = now
    state.emit("run.started")
    trigger = state.step(graph.trigger)
    trigger.move(StepStatus.SUCCEEDED)
    trigger.ports = ("out",)
    trigger.input = state.input
    trigger.output = state.input
    trigger.started_at = trigger.finished_at = now
    state.touch(graph.trigger)
    state.emit("step.succeeded", graph.trigger)
    return advance(graph, state, now)


def advance(graph: WorkflowGraph, state: RunState, now: datetime) -> list[str]:
    """Make ready what can run, evaluate control steps inline, settle the run.

    Returns the ids of action steps that became ready now (to dispatch after commit).
    Idempotent: advancing a run with nothing new to do changes nothing.
    """
    dispatch: list[str] = []
    if state.status.terminal:
        return dispatch
    while True:
        if _has_unhandled_failure(state):
            _settle(graph, state, now)
            return []
        decision = plan(graph, state.steps)
        progressed = False
        for sid in decision.skipped:
            rec = state.step(sid)
            rec.move(StepStatus.SKIPPED)
            rec.finished_at = now
            state.touch(sid)
            state.emit("step.skipped", sid)
        for sid in decision.ready:
            step = graph.step(sid)
            rec = state.step(sid)
            rec.move(StepStatus.READY)
            rec.input = step_input(graph, state, sid)
            rec.not_before = now
            state.touch(sid)
            if step.kind == "control":
                _run_control(graph, state, step, now)
                progressed = True
            else:
                state.emit("step.ready", sid)
                dispatch.append(sid)
        if not (progressed or decision.skipped):
            break
    if _settle(graph, state, now):
        return []
    return dispatch


def _has_unhandled_failure(state: RunState) -> bool:
    return any(r.status == StepStatus.FAILED and not r.ports for r in state.steps.values())


def _run_control(graph: WorkflowGraph, state: RunState, step: Step, now: datetime) -> None:
    rec = state.step(step.id)
    rec.move(StepStatus.RUNNING)
    rec.started_at = now
    rec.attempts += 1
    try:
        output, ports, response = evaluate_control(step, rec.input, bindings(graph, state))
    except ControlError as exc:
        error = {"message": str(exc), "kind": exc.kind, "field": exc.field}
        _finish_failed(step, state, error, now)
        return
    rec.move(StepStatus.SUCCEEDED)
    rec.output = output
    rec.ports = ports
    rec.finished_at = now
    if response is not None:
        state.response = response
        state.run_changed = True
        state.emit("run.responded", step.id, status=response["status"])
    state.emit("step.succeeded", step.id, ports=list(ports))


def _finish_failed(step: Step, state: RunState, error: dict[str, Any], now: datetime) -> None:
    """Record a final failure of ``step``, honouring its ``on_error`` setting."""
    rec = state.step(step.id)
    on_error = step.on_error
    rec.error = error
    rec.finished_at = now
    state.touch(step.id)
    if on_error == ON_ERROR_CONTINUE:
        rec.move(StepStatus.SUCCEEDED)
        rec.output = {"error": error, "input": rec.input}
        rec.ports = ("out",)
        state.emit("step.succeeded", step.id, continued_on_error=True)
        return
    rec.move(StepStatus.FAILED)
    if on_error == ON_ERROR_PORT:
        rec.output = {"error": error, "input": rec.input}
        rec.ports = ("error",)
    else:
        rec.ports = ()
    state.emit("step.failed", step.id, error=error)


def _settle(graph: WorkflowGraph, state: RunState, now: datetime) -> bool:
    """End the run when a failure is unhandled or every step is finished. True if ended."""
    failed = [
        sid for sid, rec in state.steps.items() if rec.status == StepStatus.FAILED and not rec.ports
    ]
    if failed:
        for sid, rec in state.steps.items():
            if rec.status in (StepStatus.PENDING, StepStatus.READY, StepStatus.RUNNING):
                rec.move(StepStatus.CANCELLED)
                rec.finished_at = now
                state.touch(sid)
        first = state.steps[failed[0]]
        state.error = {"step_id": failed[0], **(first.error or {})}
        state.move(RunStatus.FAILED)
        state.finished_at = now
        state.emit("run.failed", failed[0], error=state.error)
        return True
    if all(
        sid in state.steps and state.steps[sid].status.terminal
        for sid in (s.id for s in graph.steps)
    ):
        ends = [
            s.id
            for s in graph.steps
            if not graph.outgoing(s.id) and state.steps[s.id].status == StepStatus.SUCCEEDED
        ]
        if len(ends) == 1:
            state.output = state.steps[ends[0]].output
        else:
            state.output = {sid: state.steps[sid].output for sid in ends}
        state.move(RunStatus.SUCCEEDED)
        state.finished_at = now
        state.emit("run.succeeded")
        return True
    return False


def complete_action(
    graph: WorkflowGraph, state: RunState, step_id: str, output: Any, now: datetime
) -> list[str]:
    """Record the successful attempt of action ``step_id`` and advance the run.

    The caller has already checked the attempt is the current one (fencing). Returns the
    action step ids to dispatch.
    """
    rec = state.step(step_id)
    rec.move(StepStatus.SUCCEEDED)
    rec.output = output
    rec.ports = ("out",)
    rec.error = None
    rec.finished_at = now
    state.touch(step_id)
    state.emit("step.succeeded", step_id, attempt=rec.attempts)
    return advance(graph, state, now)


def fail_action(
    graph: WorkflowGraph,
    state: RunState,
    step_id: str,
    error: dict[str, Any],
    now: datetime,
    *,
    retryable: bool,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> tuple[list[str], float | None]:
    """Record a failed attempt of ``step_id``: schedule a retry or fail the step.

    ``error`` is ``{"message": str, "kind": str, ...}``. Returns ``(steps to dispatch now,
    retry delay in seconds or None)``; a retry leaves the step ``ready`` with
    ``not_before`` set (a durable timer the sweeper honours).
    """
    step = graph.step(step_id)
    rec = state.step(step_id)
    rec.error = error
    state.touch(step_id)
    kind = str(error.get("kind", "error"))
    if should_retry(step.retry, rec.attempts, retryable=retryable, kind=kind):
        delay = retry_delay(step.retry, rec.attempts, retry_after=retry_after, rng=rng)
        rec.move(StepStatus.READY)
        rec.not_before = now + timedelta(seconds=delay)
        state.emit("step.retry_scheduled", step_id, delay=delay, attempt=rec.attempts, error=error)
        return [], delay
    _finish_failed(step, state, error, now)
    return advance(graph, state, now), None


def cancel(state: RunState, now: datetime, reason: str) -> None:
    """Cancel a run that has not ended: unfinished steps are cancelled (cooperatively)."""
    if state.status.terminal:
        return
    for sid, rec in state.steps.items():
        if not rec.status.terminal:
            rec.move(StepStatus.CANCELLED)
            rec.finished_at = now
            state.touch(sid)
    state.error = {"message": reason, "kind": "cancelled"}
    state.move(RunStatus.CANCELLED)
    state.finished_at = now
    state.emit("run.cancelled", reason=reason)
