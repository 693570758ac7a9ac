"""Step timeouts of the steps that wait without a worker: timers and calls.

An action step's timeout is enforced by the worker running its attempt
(backend/services/runs/attempts.py). A Delay / Wait Until step (a durable timer) and a
Sub-workflow / For-each step (waiting for child runs) hold no worker, so their timeout is
a durable timer of its own:

- :func:`arm` (called by :func:`backend.engine.orchestrator.advance`) records the due
  time ``data["timeout_at"]`` = the step's start + ``Step.timeout`` on every such step that
  started waiting, and makes it the step's ``not_before`` when that comes first (a
  timer's ``not_before`` is its own due time; a call step has none), so the step is
  dispatched at its timeout like any durable timer (the sweeper makes it certain).
- :func:`expire` ends a step whose timeout passed: error ``{"kind": "timeout",
  "message": "step timed out after N s"}``, its unfinished child runs cancelled, its
  ``on_error`` setting followed. A flow step's timeout is final (no retry: the retry
  policy is about repeating a call, and the step's children are cancelled).

Inline steps (If, Set, Switch, Join, ...) finish inside the transition that starts them,
within the expression budget; they never wait, so there is nothing to time out.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from backend.engine.model import RunState
from backend.engine.nodes import NODE_TYPES
from backend.engine.nodes.base import WAITING_KINDS
from backend.engine.nodes.registry import NodeRegistry
from backend.engine.states import RunStatus, StepStatus
from designer_schema.graph import WorkflowGraph

TIMEOUT_AT = "timeout_at"
"""Key of a waiting step's timeout due time (ISO 8601) in its record's ``data``."""


def arm(
    graph: WorkflowGraph, state: RunState, now: datetime, nodes: NodeRegistry = NODE_TYPES
) -> list[str]:
    """Give every waiting timer or call step changed in this transition that has a
    timeout its due time (see the module doc; ``nodes`` tells which steps wait: the kind
    of the node-type version each pins). Returns the call steps to dispatch at their
    timeout (a timer is dispatched for its ``not_before`` already)."""
    dispatch: list[str] = []
    for step_id in sorted(state.changed):
        rec = state.steps.get(step_id)
        step = graph.step(step_id)
        if (
            rec is None
            or step.timeout is None
            or nodes.behaviour(step).kind not in WAITING_KINDS
            or rec.status not in (StepStatus.READY, StepStatus.RUNNING)
            or rec.data is None
            or TIMEOUT_AT in rec.data
        ):
            continue
        due = (rec.started_at or now) + timedelta(seconds=step.timeout)
        rec.data = {**rec.data, TIMEOUT_AT: due.isoformat()}
        if rec.status == StepStatus.RUNNING:
            rec.not_before = due
            dispatch.append(step_id)
        elif rec.not_before is None or due < rec.not_before:
            rec.not_before = due
        state.emit("step.timeout_set", step_id, due=due.isoformat())
    return dispatch


def timed_out(state: RunState, step_id: str, now: datetime) -> bool:
    """True when ``step_id`` is still waiting and its step timeout has passed."""
    rec = state.steps.get(step_id)
    if (
        state.status.terminal
        or state.status == RunStatus.PAUSED
        or rec is None
        or rec.data is None
        or rec.status not in (StepStatus.READY, StepStatus.RUNNING)
    ):
        return False
    due = rec.data.get(TIMEOUT_AT)
    return isinstance(due, str) and datetime.fromisoformat(due) <= now


def expire(graph: WorkflowGraph, state: RunState, step_id: str, now: datetime) -> str | None:
    """Prepare the end of a waiting step whose timeout passed: its unfinished children
    are asked to cancel and a timer is moved to ``running``. Returns the error to fail
    it with (the caller hands it to :func:`backend.engine.orchestrator.fail_action`,
    not retryable), or ``None`` when the step has not timed out."""
    if not timed_out(state, step_id, now):
        return None
    rec = state.steps[step_id]
    state.child_cancels.extend(
        c.run_id for c in state.children.get(step_id, []) if not RunStatus(c.status).terminal
    )
    if rec.status == StepStatus.READY:
        rec.move(StepStatus.RUNNING)
    timeout = graph.step(step_id).timeout or 0.0
    return f"step timed out after {timeout:g} s"
