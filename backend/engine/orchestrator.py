"""Orchestration: start a run, advance it, and record step outcomes, on in-memory state.

Every function here is pure over a :class:`~backend.engine.model.RunState` (plus a clock
value): the persistence layer loads the state with the run row locked, calls these, and
writes back ``state.changed`` / ``state.events`` in the same transaction. Action steps
returned by :func:`advance` are dispatched to workers after commit.

Data flow: a step's input is the output of its single activated predecessor; when several
predecessors arrived (a join), it is an object mapping each predecessor's step id to its
output. Expressions see that input as ``$`` and the bindings of :func:`bindings`.

How a step runs is decided by the *kind* of its behaviour (:mod:`backend.engine.nodes`),
looked up by the node type and the version the graph pins: ``inline`` steps are evaluated
here, ``timer`` steps wait on a durable timer, ``call`` steps wait for child runs, and
``action`` steps are returned for dispatch. ``nodes`` (default: the process registry,
:data:`backend.engine.nodes.NODE_TYPES`) is the registry to look behaviours up in.

This module holds the run-level operations; the steps it runs itself are in
:mod:`backend.engine.flow_steps`, how a step's result is recorded in
:mod:`backend.engine.step_results`, how a run ends or waits in :mod:`backend.engine.run_end`
and the expression variables in :mod:`backend.engine.expression_bindings`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from backend.engine import step_timeouts
from backend.engine.expression_bindings import LazyBindings, bindings
from backend.engine.expression_slice import Deferred
from backend.engine.flow_steps import progress_calls, run_inline, start_call, start_timer
from backend.engine.model import RunState
from backend.engine.nodes import NODE_TYPES
from backend.engine.nodes.base import (
    BehaviourKind,
    CallBehaviour,
    InlineBehaviour,
    TimerBehaviour,
    TriggerBehaviour,
)
from backend.engine.nodes.registry import NodeRegistry
from backend.engine.outcomes import AttemptOutcome, AttemptSucceeded
from backend.engine.planner import activated_sources, graph_index, plan
from backend.engine.retry import retry_delay, should_retry
from backend.engine.run_end import (
    cancel,
    fail,
    settle,
    succeed_after_end,
    time_out,
    update_waiting,
)
from backend.engine.states import RunStatus, StepStatus
from backend.engine.step_results import finish_failed, has_unhandled_failure, succeed, unhandled
from backend.engine.unfinished_attempts import counted_attempts, reopen
from designer_schema.graph import Step, WorkflowGraph

__all__ = [
    "advance",
    "behaviour_kind",
    "bindings",
    "cancel",
    "complete_action",
    "fail",
    "fail_action",
    "fire_timer",
    "inline_ready",
    "record_outcome",
    "reopen_attempt",
    "start",
    "step_input",
    "succeed_after_end",
    "time_out",
]


def behaviour_kind(step: Step, nodes: NodeRegistry = NODE_TYPES) -> BehaviourKind:
    """How ``step`` runs: the kind of the behaviour of the node-type version it pins."""
    return nodes.behaviour(step).kind


def step_input(
    graph: WorkflowGraph, state: RunState, step_id: str, nodes: NodeRegistry = NODE_TYPES
) -> Any:
    """Input of ``step_id`` from its activated predecessors (see module docstring).

    A step whose behaviour has ``keyed_input`` (Join) always gets the keyed object, even
    when one branch arrived.
    """
    sources = activated_sources(graph, step_id, state.steps)
    if len(sources) == 1 and not nodes.behaviour(graph.step(step_id)).keyed_input:
        return state.steps[sources[0]].output
    return {sid: state.steps[sid].output for sid in sources}


INPUT_OVERRIDE = "input_override"
"""Key of a pending step record's ``data`` holding the input it runs with instead of its
predecessors' output (a replay from that step with its input edited)."""


def _ready_input(graph: WorkflowGraph, state: RunState, step_id: str, nodes: NodeRegistry) -> Any:
    """Input of a step becoming ready: the edited input of a replay when its pending
    record carries one (consumed here, event ``step.input_edited``), else
    :func:`step_input`."""
    rec = state.steps[step_id]
    if rec.data and INPUT_OVERRIDE in rec.data:
        data = dict(rec.data)
        value = data.pop(INPUT_OVERRIDE)
        rec.data = data or None
        state.emit("step.input_edited", step_id)
        return value
    return step_input(graph, state, step_id, nodes)


def start(
    graph: WorkflowGraph,
    state: RunState,
    now: datetime,
    *,
    should_yield: Callable[[], bool] | None = None,
    nodes: NodeRegistry = NODE_TYPES,
) -> list[str]:
    """Start a queued run: complete the trigger step with the run input, then advance
    (``should_yield`` and ``nodes`` as for :func:`advance`; in a fresh run only the
    trigger's targets can be decided, so the first round plans just those).

    Returns the action step ids to dispatch.
    """
    state.move(RunStatus.RUNNING)
    state.started_at = now
    state.emit("run.started")
    trigger = state.step(graph.trigger)
    spec = graph.step(graph.trigger)
    behaviour = nodes.behaviour(spec)
    if isinstance(behaviour, TriggerBehaviour):
        problem = behaviour.problem(spec.config, state.input)
        if problem is not None:  # the input its trigger marked invalid: the run fails
            trigger.move(StepStatus.READY)
            trigger.input = state.input
            trigger.started_at = now
            finish_failed(spec, state, problem, now)
            return advance(graph, state, now, should_yield=should_yield, nodes=nodes)
    trigger.move(StepStatus.SUCCEEDED)
    trigger.ports = ("out",)
    trigger.input = state.input
    trigger.output = state.input
    trigger.started_at = trigger.finished_at = now
    state.touch(graph.trigger)
    state.emit("step.succeeded", graph.trigger)
    # a fresh run has only the trigger's record: only its targets can be decided (a re-run
    # that copied finished steps is planned in full)
    first = {t.target for t in graph.outgoing(graph.trigger)} if len(state.steps) == 1 else None
    return advance(graph, state, now, should_yield=should_yield, candidates=first, nodes=nodes)


def advance(
    graph: WorkflowGraph,
    state: RunState,
    now: datetime,
    *,
    should_yield: Callable[[], bool] | None = None,
    candidates: set[str] | None = None,
    nodes: NodeRegistry = NODE_TYPES,
) -> list[str]:
    """Make ready what can run, run inline/timer/call steps here, settle the run.

    Returns the ids of action steps that became ready now (to dispatch after commit) and
    of timers (and waiting steps with a step timeout) armed for later. Idempotent:
    advancing a run with nothing new to do changes nothing.

    Linear in the size of the graph: each round plans only the targets of the steps it
    finished (:func:`~backend.engine.planner.plan` with candidates), and the expression
    bindings are built once and kept current. ``should_yield()`` (checked before each
    inline step) lets the caller bound the time spent: once it answers True, the inline
    steps not yet evaluated stay ``ready`` (:func:`inline_ready` lists them) and the next
    ``advance`` evaluates them first; so it is for an inline step that ran past the slice
    of where it runs (:mod:`backend.engine.expression_slice`). ``candidates`` are the only
    pending steps the first round may decide (``None``: every step).
    """
    dispatch: list[str] = []
    if state.status.terminal or state.status == RunStatus.PAUSED:
        return dispatch
    context = LazyBindings(graph, state)
    calls = [
        sid
        for sid, rec in state.steps.items()
        if rec.status == StepStatus.RUNNING
        and rec.data is not None
        and isinstance(nodes.behaviour(graph.step(sid)), CallBehaviour)
    ]
    failed = has_unhandled_failure(state)
    yielded = False
    leftover = inline_ready(graph, state, nodes)  # left ready by an advance that yielded
    while True:
        if failed:
            settle(graph, state, now)
            return []
        touched = progress_calls(graph, state, now, calls, nodes)
        if unhandled(state, touched):
            failed = True
            continue
        for sid in leftover:
            if yielded or (should_yield is not None and should_yield()):
                yielded = True
                break
            step = graph.step(sid)
            left = nodes.behaviour(step)
            try:
                if isinstance(left, InlineBehaviour):
                    run_inline(graph, state, step, left, now, context.get())
                elif isinstance(left, CallBehaviour):
                    start_call(graph, state, step, left, now, context.get())
                    calls.append(sid)
                elif isinstance(left, TimerBehaviour):
                    if start_timer(graph, state, step, left, now, context.get()):
                        dispatch.append(sid)
            except Deferred:  # past the slice of where this runs: stays ready, yield
                yielded = True
                break
            context.record(sid)
            touched.append(sid)
        leftover = []
        decision = plan(graph, state.steps, candidates)
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
            rec.input = _ready_input(graph, state, sid, nodes)
            rec.not_before = now
            state.touch(sid)
            behaviour = nodes.behaviour(step)
            if isinstance(behaviour, TimerBehaviour | CallBehaviour):
                try:  # their config's expressions may run past the slice: as a yield
                    if isinstance(behaviour, CallBehaviour):
                        start_call(graph, state, step, behaviour, now, context.get())
                        calls.append(sid)
                    elif start_timer(graph, state, step, behaviour, now, context.get()):
                        dispatch.append(sid)
                except Deferred:
                    yielded = True
                    continue  # stays ready: started by the next advance
            elif isinstance(behaviour, InlineBehaviour):
                yielded = yielded or (should_yield is not None and should_yield())
                if yielded:
                    continue  # stays ready: evaluated by the next advance
                try:
                    run_inline(graph, state, step, behaviour, now, context.get())
                except Deferred:  # past the slice of where this runs: as a yield
                    yielded = True
                    continue
            else:
                state.emit("step.ready", sid)
                dispatch.append(sid)
                continue
            context.record(sid)
            touched.append(sid)
        failed = unhandled(state, touched)
        if not (touched or decision.skipped):
            break
        candidates = {
            t.target for sid in [*touched, *decision.skipped] for t in graph.outgoing(sid)
        }
    if settle(graph, state, now):
        return []
    dispatch += step_timeouts.arm(graph, state, now, nodes)
    update_waiting(graph, state, nodes)
    return dispatch


def inline_ready(
    graph: WorkflowGraph, state: RunState, nodes: NodeRegistry = NODE_TYPES
) -> list[str]:
    """Steps left ``ready`` by an :func:`advance` that yielded, in graph order: inline
    steps, and call and timer steps whose config's expressions ran past the slice (a
    timer armed for later is ``ready`` too, with its due time in ``data``)."""
    found = []
    for sid, rec in state.steps.items():
        if rec.status != StepStatus.READY:
            continue
        kind = behaviour_kind(graph.step(sid), nodes)
        if kind in ("inline", "call") or (kind == "timer" and rec.data is None):
            found.append(sid)
    order = graph_index(graph)
    return sorted(found, key=lambda sid: order.get(sid, 0))


def fire_timer(
    graph: WorkflowGraph,
    state: RunState,
    step_id: str,
    now: datetime,
    *,
    nodes: NodeRegistry = NODE_TYPES,
) -> list[str]:
    """Fire the timer of ``step_id`` if it is due: the step succeeds with its input.

    Returns the action steps to dispatch; a timer not yet due (or already fired, or of a
    run that ended, or a step that is not a timer) changes nothing and returns ``[]``.
    """
    rec = state.steps.get(step_id)
    if (
        state.status.terminal
        or rec is None
        or rec.status != StepStatus.READY
        or nodes.behaviour(graph.step(step_id)).kind != "timer"
        or (rec.not_before is not None and rec.not_before > now)
    ):
        return []
    succeed(state, step_id, rec.input, now, fired=True)
    return advance(graph, state, now, nodes=nodes)


def complete_action(
    graph: WorkflowGraph,
    state: RunState,
    step_id: str,
    output: Any,
    now: datetime,
    *,
    nodes: NodeRegistry = NODE_TYPES,
) -> list[str]:
    """Record the successful attempt of action ``step_id`` and advance the run.

    The caller has already checked the attempt is the current one (fencing). Returns the
    action step ids to dispatch.
    """
    succeed(state, step_id, output, now, attempt=state.step(step_id).attempts)
    return advance(graph, state, now, nodes=nodes)


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
    nodes: NodeRegistry = NODE_TYPES,
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
    counted = counted_attempts(rec)  # a lost or handed-back attempt uses up no retry
    if should_retry(step.retry, counted, retryable=retryable, kind=kind):
        delay = retry_delay(step.retry, counted, retry_after=retry_after, rng=rng)
        rec.move(StepStatus.READY)
        rec.not_before = now + timedelta(seconds=delay)
        state.emit("step.retry_scheduled", step_id, delay=delay, attempt=rec.attempts, error=error)
        return [], delay
    finish_failed(step, state, error, now)
    return advance(graph, state, now, nodes=nodes), None


def record_outcome(
    graph: WorkflowGraph,
    state: RunState,
    step_id: str,
    outcome: AttemptOutcome,
    now: datetime,
    *,
    nodes: NodeRegistry = NODE_TYPES,
) -> tuple[list[str], float | None]:
    """Record the current attempt of action ``step_id`` as ``outcome`` and advance the run:
    :func:`complete_action` or :func:`fail_action`. Returns ``(steps to dispatch, retry
    delay in seconds or None)``."""
    if isinstance(outcome, AttemptSucceeded):
        return complete_action(graph, state, step_id, outcome.output, now, nodes=nodes), None
    return fail_action(
        graph,
        state,
        step_id,
        outcome.error,
        now,
        retryable=outcome.retryable,
        retry_after=outcome.retry_after,
        nodes=nodes,
    )


def reopen_attempt(
    graph: WorkflowGraph,
    state: RunState,
    step_id: str,
    attempt_id: int,
    now: datetime,
    *,
    lost: bool,
    nodes: NodeRegistry = NODE_TYPES,
) -> list[str]:
    """The running attempt ``attempt_id`` of ``step_id`` ended without an outcome: its
    worker was lost (``lost``: lease expired) or handed it back at shutdown
    (:func:`backend.engine.unfinished_attempts.reopen`). Returns the steps to dispatch: the
    step itself, ready again, or, when its workers were lost too often and it failed, what
    advancing the run made ready."""
    if reopen(graph, state, step_id, attempt_id, now, lost=lost):
        return [step_id]
    return advance(graph, state, now, nodes=nodes)
