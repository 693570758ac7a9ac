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
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from backend.engine import step_timeouts
from backend.engine.control import ControlError, evaluate_control
from backend.engine.expressions import ExpressionError, resolve_config
from backend.engine.model import ChildRequest, RunState
from backend.engine.nodes import FLOW_INLINE_TYPES, WAIT_TYPES
from backend.engine.nodes.calls import CALL_TYPES, FOREACH, child_failed, child_run_id
from backend.engine.nodes.flow import JOIN, FlowError, evaluate_flow
from backend.engine.nodes.waits import TIMER_TYPES, TimerError, due_time
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


def step_input(graph: WorkflowGraph, state: RunState, step_id: str) -> Any:
    """Input of ``step_id`` from its activated predecessors (see module docstring).

    A Join node always gets the keyed object, even when one branch arrived.
    """
    sources = activated_sources(graph, step_id, state.steps)
    if len(sources) == 1 and graph.step(step_id).type != JOIN:
        return state.steps[sources[0]].output
    return {sid: state.steps[sid].output for sid in sources}


def start(
    graph: WorkflowGraph,
    state: RunState,
    now: datetime,
    *,
    should_yield: Callable[[], bool] | None = None,
) -> list[str]:
    """Start a queued run: complete the trigger step with the run input, then advance
    (``should_yield`` as for :func:`advance`; in a fresh run only the trigger's targets
    can be decided, so the first round plans just those).

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
    return advance(graph, state, now, should_yield=should_yield, candidates=first)


def advance(
    graph: WorkflowGraph,
    state: RunState,
    now: datetime,
    *,
    should_yield: Callable[[], bool] | None = None,
    candidates: set[str] | None = None,
) -> list[str]:
    """Make ready what can run, evaluate control steps inline, settle the run.

    Returns the ids of action steps that became ready now (to dispatch after commit).
    Idempotent: advancing a run with nothing new to do changes nothing.

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
        and graph.step(sid).type in CALL_TYPES
    ]
    failed = _has_unhandled_failure(state)
    yielded = False
    leftover = inline_ready(graph, state)  # left ready by an advance that yielded
    while True:
        if failed:
            _settle(graph, state, now)
            return []
        touched = _progress_calls(graph, state, now, calls)
        if _unhandled(state, touched):
            failed = True
            continue
        for sid in leftover:
            if should_yield is not None and should_yield():
                yielded = True
                break
            _run_control(graph, state, graph.step(sid), now, context.get())
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
            rec.input = step_input(graph, state, sid)
            rec.not_before = now
            state.touch(sid)
            if step.type in TIMER_TYPES:
                if _start_timer(graph, state, step, now, context.get()):
                    dispatch.append(sid)
            elif step.type in CALL_TYPES:
                _start_call(graph, state, step, now, context.get())
                calls.append(sid)
            elif step.kind == "control":
                yielded = yielded or (should_yield is not None and should_yield())
                if yielded:
                    continue  # stays ready: evaluated by the next advance
                _run_control(graph, state, step, now, context.get())
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
    dispatch += step_timeouts.arm(graph, state, now)
    _update_waiting(graph, state)
    return dispatch


def inline_ready(graph: WorkflowGraph, state: RunState) -> list[str]:
    """Inline (control) steps left ``ready`` by an :func:`advance` that yielded, in graph
    order."""
    found = []
    for sid, rec in state.steps.items():
        if rec.status == StepStatus.READY:
            step = graph.step(sid)
            if step.kind == "control" and step.type not in WAIT_TYPES:
                found.append(sid)
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


def _update_waiting(graph: WorkflowGraph, state: RunState) -> None:
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
    waiting = all(graph.step(sid).type in WAIT_TYPES for sid in active)
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
    graph: WorkflowGraph, state: RunState, step: Step, now: datetime, context: dict[str, Any]
) -> bool:
    """Arm a Delay / Wait Until step; True when it must be dispatched for later."""
    rec = state.step(step.id)
    rec.started_at = now
    config = _resolved(state, step, now, context)
    if config is None:
        return False
    try:
        due = due_time(step.type, config, now)
    except TimerError as exc:
        rec.move(StepStatus.RUNNING)
        _finish_failed(step, state, {"message": str(exc), "kind": "invalid_config"}, now)
        return False
    if due <= now:
        _succeed(state, step.id, rec.input, now)
        return False
    rec.not_before = due
    rec.data = {"due": due.isoformat()}
    state.emit("step.timer_set", step.id, due=due.isoformat())
    return True


def fire_timer(graph: WorkflowGraph, state: RunState, step_id: str, now: datetime) -> list[str]:
    """Fire the timer of ``step_id`` if it is due: the step succeeds with its input.

    Returns the action steps to dispatch; a timer not yet due (or already fired, or of a
    run that ended) changes nothing and returns ``[]``.
    """
    rec = state.steps.get(step_id)
    if (
        state.status.terminal
        or rec is None
        or rec.status != StepStatus.READY
        or graph.step(step_id).type not in TIMER_TYPES
        or (rec.not_before is not None and rec.not_before > now)
    ):
        return []
    _succeed(state, step_id, rec.input, now, fired=True)
    return advance(graph, state, now)


def _start_call(
    graph: WorkflowGraph, state: RunState, step: Step, now: datetime, context: dict[str, Any]
) -> None:
    """Start a Sub-workflow / For-each step: it runs (without a worker) until children end."""
    rec = state.step(step.id)
    rec.move(StepStatus.RUNNING)
    rec.started_at = now
    rec.attempts += 1
    config = _resolved(state, step, now, context)
    if config is None:
        return
    problem = _call_config_problem(step.type, config)
    if problem is not None:
        _finish_failed(step, state, {"message": problem[1], "kind": "invalid_config"}, now)
        return
    data: dict[str, Any] = {
        "workflow_id": config["workflow_id"],
        "version": config.get("version"),
        "wait": config.get("wait", True) is not False,
    }
    if step.type == FOREACH:
        data["items"] = config["items"]
        data["concurrency"] = config.get("concurrency") or 1
        data["on_item_error"] = config.get("on_item_error") or "stop"
    else:
        child_input = config.get("input")
        data["input"] = rec.input if child_input is None else child_input
    rec.data = data
    state.touch(step.id)
    state.emit("step.waiting", step.id)
    if data["wait"]:
        return
    if step.type == FOREACH:
        ids = [
            _request_child(state, step.id, i, {"item": item, "index": i, "input": rec.input})
            for i, item in enumerate(data["items"])
        ]
        _succeed(state, step.id, {"run_ids": ids}, now, fire_and_forget=True)
    else:
        child = _request_child(state, step.id, 0, data["input"])
        _succeed(state, step.id, {"run_id": child}, now, fire_and_forget=True)


def _call_config_problem(node_type: str, config: dict[str, Any]) -> tuple[str, str] | None:
    workflow_id = config.get("workflow_id")
    if not isinstance(workflow_id, str) or not workflow_id:
        return "workflow_id", "workflow_id must name a workflow"
    version = config.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        return "version", f"version must be a version number or empty, got {version!r}"
    if node_type == FOREACH:
        if not isinstance(config.get("items"), list):
            return "items", f"items must be a list, got {type(config.get('items')).__name__}"
        concurrency = config.get("concurrency") or 1
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            return "concurrency", f"concurrency must be an integer >= 1, got {concurrency!r}"
    return None


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
    graph: WorkflowGraph, state: RunState, now: datetime, calls: list[str]
) -> list[str]:
    """Advance the running Sub-workflow / For-each steps ``calls`` from their children;
    returns those that ended (and drops them from ``calls``)."""
    ended: list[str] = []
    for sid in list(calls):
        rec = state.steps.get(sid)
        if rec is None or rec.status != StepStatus.RUNNING or rec.data is None:
            calls.remove(sid)
            continue
        step = graph.step(sid)
        if step.type == FOREACH:
            done = _progress_foreach(step, state, now)
        else:
            done = _progress_subworkflow(step, state, now)
        if done:
            calls.remove(sid)
            ended.append(sid)
    return ended


def _child_error(child: Any) -> dict[str, Any]:
    error = dict(child.error or {})
    message = error.get("message") or f"child run {child.status}"
    return {
        "message": message,
        "kind": "child_failed",
        "child_run_id": child.run_id,
        "child_status": child.status,
        "child_error": error,
    }


def _progress_subworkflow(step: Step, state: RunState, now: datetime) -> bool:
    rec = state.step(step.id)
    children = {c.index: c for c in state.children.get(step.id, [])}
    child = children.get(0)
    if child is None:
        if not any(r.step_id == step.id for r in state.child_requests):
            _request_child(state, step.id, 0, (rec.data or {}).get("input"))
        return False
    if child.status == RunStatus.SUCCEEDED.value:
        _succeed(state, step.id, child.output, now, child_run_id=child.run_id)
        return True
    if child_failed(child.status):
        _finish_failed(step, state, _child_error(child), now)
        return True
    return False


def _progress_foreach(step: Step, state: RunState, now: datetime) -> bool:
    rec = state.step(step.id)
    data = rec.data or {}
    items: list[Any] = list(data.get("items") or [])
    children = {c.index: c for c in state.children.get(step.id, [])}
    requested = {r.index for r in state.child_requests if r.step_id == step.id}
    failed = sorted(i for i, c in children.items() if child_failed(c.status))
    if failed and data.get("on_item_error", "stop") == "stop":
        for c in children.values():
            if not RunStatus(c.status).terminal:
                state.child_cancels.append(c.run_id)
        error = _child_error(children[failed[0]])
        error["kind"] = "item_failed"
        error["index"] = failed[0]
        _finish_failed(step, state, error, now)
        return True
    done = [i for i, c in children.items() if RunStatus(c.status).terminal]
    if len(done) == len(items):
        results = [
            {"error": _child_error(children[i])} if i in failed else children[i].output
            for i in range(len(items))
        ]
        _succeed(state, step.id, results, now, items=len(items), failed=len(failed))
        return True
    active = len(children) - len(done) + len(requested)
    limit = int(data.get("concurrency") or 1)
    for index, item in enumerate(items):
        if active >= limit:
            break
        if index in children or index in requested:
            continue
        _request_child(state, step.id, index, {"item": item, "index": index, "input": rec.input})
        active += 1
    return False


def _has_unhandled_failure(state: RunState) -> bool:
    return any(r.status == StepStatus.FAILED and not r.ports for r in state.steps.values())


def _run_control(
    graph: WorkflowGraph, state: RunState, step: Step, now: datetime, context: dict[str, Any]
) -> None:
    rec = state.step(step.id)
    rec.move(StepStatus.RUNNING)
    rec.started_at = now
    rec.attempts += 1
    try:
        if step.type in FLOW_INLINE_TYPES:
            output, ports = evaluate_flow(step, rec.input, context)
            response = None
        else:
            output, ports, response = evaluate_control(step, rec.input, context)
    except (ControlError, FlowError) as exc:
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
    _succeed(state, step_id, output, now, attempt=state.step(step_id).attempts)
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
