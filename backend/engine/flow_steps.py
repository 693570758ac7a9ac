"""Steps the orchestrator runs itself, by behaviour kind: inline steps evaluated at once,
timer steps armed on a durable timer, call steps waiting for their child runs.

Pure over :class:`~backend.engine.model.RunState`; :func:`backend.engine.orchestrator.advance`
calls these for the steps that became ready (see :mod:`backend.engine.nodes` for the kinds).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from backend.engine.expression_slice import Deferred
from backend.engine.expressions import ExpressionError, resolve_config
from backend.engine.model import ChildRequest, ChildRun, ChildSummary, RunState, StepRecord
from backend.engine.nodes.base import (
    CallBehaviour,
    CallFailed,
    CallSucceeded,
    InlineBehaviour,
    NodeError,
    TimerBehaviour,
)
from backend.engine.nodes.children import child_run_id
from backend.engine.nodes.config import typed_config
from backend.engine.nodes.registry import NodeRegistry
from backend.engine.states import RunStatus, StepStatus
from backend.engine.step_results import finish_failed, resolved_config, succeed
from designer_schema.graph import Step, WorkflowGraph


def run_inline(
    graph: WorkflowGraph,
    state: RunState,
    step: Step,
    inline: InlineBehaviour,
    now: datetime,
    context: dict[str, Any],
) -> None:
    """Evaluate an inline step (If, Set, Switch, ...) now: it succeeds on the ports the
    behaviour chose, or fails (expression or node error) honouring ``on_error``. Raises
    :class:`~backend.engine.expression_slice.Deferred`, the step ``ready`` again, when its
    expressions ran past the slice of where it runs."""
    rec = state.step(step.id)
    rec.move(StepStatus.RUNNING)
    rec.started_at = now
    rec.attempts += 1
    # written with this change whichever way it ends: a step left ready by an advance that
    # yielded became ready (and was marked changed) in an earlier change, not this one
    state.touch(step.id)
    try:
        config = resolve_config(step.config, step.expressions, rec.input, context)
        result = inline.evaluate(step, typed_config(inline, config, step.expressions), rec.input)
    except Deferred:  # too long for where it runs: ready again, as before (a worker's)
        rec.move(StepStatus.READY)
        rec.attempts -= 1
        rec.started_at = None
        raise
    except ExpressionError as exc:
        error = {"message": str(exc), "kind": "expression_error", "field": exc.field}
        finish_failed(step, state, error, now)
        return
    except NodeError as exc:
        error = {"message": str(exc), "kind": exc.kind, "field": exc.field}
        finish_failed(step, state, error, now)
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


def start_timer(
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
    config = resolved_config(state, step, now, context)
    if config is None:
        return False
    try:
        due = timer.due(typed_config(timer, config, step.expressions), now)
    except NodeError as exc:
        rec.move(StepStatus.RUNNING)
        error = {"message": str(exc), "kind": exc.kind, "field": exc.field}
        finish_failed(step, state, error, now)
        return False
    if due <= now:
        succeed(state, step.id, rec.input, now)
        return False
    rec.not_before = due
    rec.data = {"due": due.isoformat()}
    state.emit("step.timer_set", step.id, due=due.isoformat())
    return True


def start_call(
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
    rec.started_at = now
    # first, as nothing else changes: it may raise Deferred (past the slice: stays ready)
    config = resolved_config(state, step, now, context)
    if config is None:
        return
    rec.move(StepStatus.RUNNING)
    rec.attempts += 1
    try:
        data = call.start(typed_config(call, config, step.expressions), rec.input)
    except NodeError as exc:
        error = {"message": str(exc), "kind": exc.kind, "field": exc.field}
        finish_failed(step, state, error, now)
        return
    rec.data = data
    state.touch(step.id)
    state.emit("step.waiting", step.id)
    if data["wait"]:
        return
    ids = [
        request_child(state, step.id, i, child_input)
        for i, child_input in enumerate(call.forget(data, rec.input))
    ]
    succeed(state, step.id, call.forgotten_output(ids), now, fire_and_forget=True)


def request_child(state: RunState, step_id: str, index: int, child_input: Any) -> str:
    """Ask for child run ``index`` of call step ``step_id`` (created after commit); its id."""
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


REFUSED = "refused"
"""Key of a calling step's data that holds the children the store refused, by index:
``{"<index>": <error>}`` (the called workflow not found, archived or not granted when the
child was to start). A refused child has no run row; recording it with the step keeps it
failed in every later pass, as a child run's row would."""


def refuse_child(state: RunState, step_id: str, index: int, error: dict[str, Any]) -> None:
    """Record that child ``index`` of call step ``step_id`` was refused with ``error``
    (see :data:`REFUSED`); the step record is written with the run's change."""
    rec = state.step(step_id)
    data = dict(rec.data or {})  # a new container: the old one may be a stored payload's
    data[REFUSED] = {**(data.get(REFUSED) or {}), str(index): error}
    rec.data = data
    state.touch(step_id)


def refused_children(state_run_id: str, step_id: str, data: Any) -> dict[int, ChildRun]:
    """The refused children of call step ``step_id`` (:data:`REFUSED`) as failed
    :class:`ChildRun`, by index."""
    refused = (data or {}).get(REFUSED) if isinstance(data, dict) else None
    return {
        int(i): ChildRun(
            step_id, int(i), child_run_id(state_run_id, step_id, int(i)), "failed", None, error
        )
        for i, error in (refused or {}).items()
    }


def _children_of(state: RunState, step_id: str, data: Any) -> dict[int, ChildRun]:
    """The children of call step ``step_id`` the engine sees: those the store listed and
    those it refused."""
    children = refused_children(state.run_id, step_id, data)
    children.update((c.index, c) for c in state.children.get(step_id, []))
    return children


def outputs_wanted(
    graph: WorkflowGraph,
    records: Mapping[str, StepRecord],
    children: Mapping[str, list[ChildRun]],
    summaries: Mapping[str, ChildSummary],
    nodes: NodeRegistry,
) -> set[str]:
    """The call steps whose every child (with its output) the next move reads: a running
    Sub-workflow or For-each step that has all its children (``children_total``) and
    every one ended. ``children`` are the children that did not succeed, ``summaries``
    count the others: the store reads every child of those steps only, so a parent woken
    by each of 10,000 children reads the few running or failed ones, not 10,000 rows,
    until the last one."""
    wanted: set[str] = set()
    for sid in set(children) | set(summaries):
        rec = records.get(sid)
        if rec is None or rec.status != StepStatus.RUNNING or rec.data is None:
            continue
        call = nodes.behaviour(graph.step(sid))
        if not isinstance(call, CallBehaviour):
            continue
        refused = refused_children("", sid, rec.data)
        entries = [c for c in children.get(sid, []) if c.index not in refused]
        entries += refused.values()
        count = len(entries) + summaries.get(sid, ChildSummary()).succeeded
        if count >= call.children_total(rec.data) and all(
            RunStatus(c.status).terminal for c in entries
        ):
            wanted.add(sid)
    return wanted


def progress_calls(
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
        children = _children_of(state, sid, rec.data)
        requested = frozenset(r.index for r in state.child_requests if r.step_id == sid)
        summary = state.child_summaries.get(sid)
        progress = call.progress(rec.data, rec.input, children, requested, summary)
        if isinstance(progress, CallSucceeded):
            succeed(state, sid, progress.output, now, **progress.details)
        elif isinstance(progress, CallFailed):
            state.child_cancels.extend(progress.cancel)
            finish_failed(step, state, progress.error, now)
        else:
            for index, child_input in progress.request:
                request_child(state, sid, index, child_input)
            continue
        calls.remove(sid)
        ended.append(sid)
    return ended
