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
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from backend.engine import step_timeouts
from backend.engine.expressions import ExpressionError, resolve_config
from backend.engine.model import ChildRequest, RunState
from backend.engine.nodes import NODE_TYPES
from backend.engine.nodes.base import (
    WAITING_KINDS,
    BehaviourKind,
    CallBehaviour,
    CallFailed,
    CallSucceeded,
    InlineBehaviour,
    NodeError,
    TimerBehaviour,
)
from backend.engine.nodes.children import child_run_id
from backend.engine.nodes.registry import NodeRegistry
from backend.engine.outcomes import AttemptOutcome, AttemptSucceeded
from backend.engine.planner import activated_sources, graph_index, plan
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
    ``advance`` evaluates them first. ``candidates`` are the only pending steps the
    first round may decide (``None``: every step).
    """
    dispatch: list[str] = []
    if state.status.terminal or state.status == RunStatus.PAUSED:
        return dispatch
    context = _LazyBindings(graph, state)
    calls = [
        sid
        for sid, rec in state.steps.items()
        if rec.status == StepStatus.RUNNING
        and rec.data is not None
        and isinstance(nodes.behaviour(graph.step(sid)), CallBehaviour)
    ]
    failed = _has_unhandled_failure(state)
    yielded = False
    leftover = inline_ready(graph, state, nodes)  # left ready by an advance that yielded
    while True:
        if failed:
            _settle(graph, state, now)
            return []
        touched = _progress_calls(graph, state, now, calls, nodes)
        if _unhandled(state, touched):
            failed = True
            continue
        for sid in leftover:
            if should_yield is not None and should_yield():
                yielded = True
                break
            step = graph.step(sid)
            inline = nodes.behaviour(step)
            assert isinstance(inline, InlineBehaviour)  # inline_ready lists only those
            _run_inline(graph, state, step, inline, now, context.get())
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
            if isinstance(behaviour, TimerBehaviour):
                if _start_timer(graph, state, step, behaviour, now, context.get()):
                    dispatch.append(sid)
            elif isinstance(behaviour, CallBehaviour):
                _start_call(graph, state, step, behaviour, now, context.get())
                calls.append(sid)
            elif isinstance(behaviour, InlineBehaviour):
                yielded = yielded or (should_yield is not None and should_yield())
                if yielded:
                    continue  # stays ready: evaluated by the next advance
                _run_inline(graph, state, step, behaviour, now, context.get())
            else:
                state.emit("step.ready", sid)
                dispatch.append(sid)
                continue
            context.record(sid)
            touched.append(sid)
        failed = _unhandled(state, touched)
        if not (touched or decision.skipped):
            break
        candidates = {
            t.target for sid in [*touched, *decision.skipped] for t in graph.outgoing(sid)
        }
    if _settle(graph, state, now):
        return []
    dispatch += step_timeouts.arm(graph, state, now, nodes)
    _update_waiting(graph, state, nodes)
    return dispatch


def inline_ready(
    graph: WorkflowGraph, state: RunState, nodes: NodeRegistry = NODE_TYPES
) -> list[str]:
    """Inline steps left ``ready`` by an :func:`advance` that yielded, in graph order."""
    found = [
        sid
        for sid, rec in state.steps.items()
        if rec.status == StepStatus.READY and behaviour_kind(graph.step(sid), nodes) == "inline"
    ]
    order = graph_index(graph)
    return sorted(found, key=lambda sid: order.get(sid, 0))


class _LazyBindings:
    """The expression bindings of one :func:`advance`, built on first use (an advance
    that evaluates nothing never builds them) and kept current as steps finish."""

    def __init__(self, graph: WorkflowGraph, state: RunState) -> None:
        self._graph = graph
        self._state = state
        self._context: dict[str, Any] | None = None

    def get(self) -> dict[str, Any]:
        if self._context is None:
            self._context = bindings(self._graph, self._state)
        return self._context

    def record(self, step_id: str) -> None:
        """A finished step's output joins ``$steps`` (when the bindings exist)."""
        rec = self._state.steps[step_id]
        if self._context is not None and rec.status in (StepStatus.SUCCEEDED, StepStatus.FAILED):
            self._context["steps"][step_id] = rec.output


def _unhandled(state: RunState, step_ids: list[str]) -> bool:
    """True when one of ``step_ids`` failed without routing the failure to a port."""
    return any(
        state.steps[sid].status == StepStatus.FAILED and not state.steps[sid].ports
        for sid in step_ids
    )


def _update_waiting(graph: WorkflowGraph, state: RunState, nodes: NodeRegistry) -> None:
    """``waiting`` while every unfinished step is a timer or a call, else ``running``."""
    if state.status not in (RunStatus.RUNNING, RunStatus.WAITING):
        return
    active = [
        sid
        for sid, rec in state.steps.items()
        if rec.status in (StepStatus.READY, StepStatus.RUNNING)
    ]
    if not active:
        return
    waiting = all(nodes.behaviour(graph.step(sid)).kind in WAITING_KINDS for sid in active)
    state.move(RunStatus.WAITING if waiting else RunStatus.RUNNING)


def _succeed(state: RunState, step_id: str, output: Any, now: datetime, **data: Any) -> None:
    rec = state.step(step_id)
    rec.move(StepStatus.SUCCEEDED)
    rec.output = output
    rec.ports = ("out",)
    rec.error = None
    rec.finished_at = now
    state.touch(step_id)
    state.emit("step.succeeded", step_id, **data)


def _resolved(
    state: RunState, step: Step, now: datetime, context: dict[str, Any]
) -> dict[str, Any] | None:
    """The step's config with expressions evaluated; ``None`` after failing the step."""
    rec = state.step(step.id)
    try:
        return resolve_config(step.config, step.expressions, rec.input, context)
    except ExpressionError as exc:
        error = {"message": str(exc), "kind": "expression_error", "field": exc.field}
        _finish_failed(step, state, error, now)
        return None


def _start_timer(
    graph: WorkflowGraph,
    state: RunState,
    step: Step,
    timer: TimerBehaviour,
    now: datetime,
    context: dict[str, Any],
) -> bool:
    """Arm a timer step (Delay, Wait Until); True when it must be dispatched for later."""
    rec = state.step(step.id)
    rec.started_at = now
    config = _resolved(state, step, now, context)
    if config is None:
        return False
    try:
        due = timer.due(config, now)
    except NodeError as exc:
        rec.move(StepStatus.RUNNING)
        _finish_failed(step, state, {"message": str(exc), "kind": exc.kind}, now)
        return False
    if due <= now:
        _succeed(state, step.id, rec.input, now)
        return False
    rec.not_before = due
    rec.data = {"due": due.isoformat()}
    state.emit("step.timer_set", step.id, due=due.isoformat())
    return True


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
    _succeed(state, step_id, rec.input, now, fired=True)
    return advance(graph, state, now, nodes=nodes)


def _start_call(
    graph: WorkflowGraph,
    state: RunState,
    step: Step,
    call: CallBehaviour,
    now: datetime,
    context: dict[str, Any],
) -> None:
    """Start a call step (Sub-workflow, For-each): it runs, without a worker, until its
    child runs end; fire-and-forget calls start every child and succeed at once."""
    rec = state.step(step.id)
    rec.move(StepStatus.RUNNING)
    rec.started_at = now
    rec.attempts += 1
    config = _resolved(state, step, now, context)
    if config is None:
        return
    try:
        data = call.start(config, rec.input)
    except NodeError as exc:
        _finish_failed(step, state, {"message": str(exc), "kind": exc.kind}, now)
        return
    rec.data = data
    state.touch(step.id)
    state.emit("step.waiting", step.id)
    if data["wait"]:
        return
    ids = [
        _request_child(state, step.id, i, child_input)
        for i, child_input in enumerate(call.forget(data, rec.input))
    ]
    _succeed(state, step.id, call.forgotten_output(ids), now, fire_and_forget=True)


def _request_child(state: RunState, step_id: str, index: int, child_input: Any) -> str:
    rec = state.step(step_id)
    data = rec.data or {}
    run_id = child_run_id(state.run_id, step_id, index)
    state.child_requests.append(
        ChildRequest(
            step_id=step_id,
            index=index,
            run_id=run_id,
            workflow_id=str(data["workflow_id"]),
            version=data.get("version"),
            input=child_input,
            wait=bool(data.get("wait", True)),
        )
    )
    state.emit("child.requested", step_id, index=index, child_run_id=run_id)
    return run_id


def _progress_calls(
    graph: WorkflowGraph,
    state: RunState,
    now: datetime,
    calls: list[str],
    nodes: NodeRegistry,
) -> list[str]:
    """Advance the running call steps ``calls`` (Sub-workflow, For-each) from their
    children; returns those that ended (and drops them from ``calls``)."""
    ended: list[str] = []
    for sid in list(calls):
        rec = state.steps.get(sid)
        if rec is None or rec.status != StepStatus.RUNNING or rec.data is None:
            calls.remove(sid)
            continue
        step = graph.step(sid)
        call = nodes.behaviour(step)
        if not isinstance(call, CallBehaviour):
            calls.remove(sid)
            continue
        children = {c.index: c for c in state.children.get(sid, [])}
        requested = frozenset(r.index for r in state.child_requests if r.step_id == sid)
        progress = call.progress(rec.data, rec.input, children, requested)
        if isinstance(progress, CallSucceeded):
            _succeed(state, sid, progress.output, now, **progress.details)
        elif isinstance(progress, CallFailed):
            state.child_cancels.extend(progress.cancel)
            _finish_failed(step, state, progress.error, now)
        else:
            for index, child_input in progress.request:
                _request_child(state, sid, index, child_input)
            continue
        calls.remove(sid)
        ended.append(sid)
    return ended


def _has_unhandled_failure(state: RunState) -> bool:
    return any(r.status == StepStatus.FAILED and not r.ports for r in state.steps.values())


def _run_inline(
    graph: WorkflowGraph,
    state: RunState,
    step: Step,
    inline: InlineBehaviour,
    now: datetime,
    context: dict[str, Any],
) -> None:
    rec = state.step(step.id)
    rec.move(StepStatus.RUNNING)
    rec.started_at = now
    rec.attempts += 1
    try:
        config = resolve_config(step.config, step.expressions, rec.input, context)
        result = inline.evaluate(step, config, rec.input)
    except ExpressionError as exc:
        error = {"message": str(exc), "kind": "expression_error", "field": exc.field}
        _finish_failed(step, state, error, now)
        return
    except NodeError as exc:
        error = {"message": str(exc), "kind": exc.kind, "field": exc.field}
        _finish_failed(step, state, error, now)
        return
    rec.move(StepStatus.SUCCEEDED)
    rec.output = result.output
    rec.ports = result.ports
    rec.finished_at = now
    if result.response is not None:
        state.response = result.response
        state.run_changed = True
        state.emit("run.responded", step.id, status=result.response["status"])
    state.emit("step.succeeded", step.id, ports=list(result.ports))


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
    _succeed(state, step_id, output, now, attempt=state.step(step_id).attempts)
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
    if should_retry(step.retry, rec.attempts, retryable=retryable, kind=kind):
        delay = retry_delay(step.retry, rec.attempts, retry_after=retry_after, rng=rng)
        rec.move(StepStatus.READY)
        rec.not_before = now + timedelta(seconds=delay)
        state.emit("step.retry_scheduled", step_id, delay=delay, attempt=rec.attempts, error=error)
        return [], delay
    _finish_failed(step, state, error, now)
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


def cancel(state: RunState, now: datetime, reason: str) -> None:
    """Cancel a run that has not ended: unfinished steps are cancelled (cooperatively)."""
    _end_unfinished(state, now, RunStatus.CANCELLED, {"message": reason, "kind": "cancelled"})


def time_out(state: RunState, now: datetime, message: str) -> None:
    """End a run that passed its run timeout: status ``timed_out``, error kind ``timeout``.

    Like :func:`cancel`, unfinished steps (running ones included) become ``cancelled``,
    unfinished child runs are asked to cancel, and nothing downstream starts.
    """
    _end_unfinished(state, now, RunStatus.TIMED_OUT, {"message": message, "kind": "timeout"})


def _end_unfinished(
    state: RunState, now: datetime, status: RunStatus, error: dict[str, Any]
) -> None:
    if state.status.terminal:
        return
    for children in state.children.values():
        state.child_cancels.extend(c.run_id for c in children if not RunStatus(c.status).terminal)
    for sid, rec in state.steps.items():
        if not rec.status.terminal:
            rec.move(StepStatus.CANCELLED)
            rec.finished_at = now
            state.touch(sid)
    state.error = error
    state.move(status)
    state.finished_at = now
    state.emit(f"run.{status.value}", reason=error["message"])
