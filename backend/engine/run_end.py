"""How a run ends or waits: settling (failed on an unhandled failure, succeeded when
every step finished), cancelling, timing out, and ``waiting`` while only timers and calls
are left; and an attempt that completes after its run ended.

Pure over :class:`~backend.engine.model.RunState`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from backend.engine.model import RunState
from backend.engine.nodes.base import WAITING_KINDS
from backend.engine.nodes.registry import NodeRegistry
from backend.engine.states import RunStatus, StepStatus
from backend.engine.step_results import succeed
from designer_schema.graph import WorkflowGraph


def settle(graph: WorkflowGraph, state: RunState, now: datetime) -> bool:
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


def update_waiting(graph: WorkflowGraph, state: RunState, nodes: NodeRegistry) -> None:
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


def cancel(state: RunState, now: datetime, reason: str) -> None:
    """Cancel a run that has not ended: unfinished steps are cancelled (cooperatively)."""
    _end_unfinished(state, now, RunStatus.CANCELLED, {"message": reason, "kind": "cancelled"})


def time_out(state: RunState, now: datetime, message: str) -> None:
    """End a run that passed its run timeout: status ``timed_out``, error kind ``timeout``.

    Like :func:`cancel`, unfinished steps (running ones included) become ``cancelled``,
    unfinished child runs are asked to cancel, and nothing downstream starts.
    """
    _end_unfinished(state, now, RunStatus.TIMED_OUT, {"message": message, "kind": "timeout"})


def fail(state: RunState, now: datetime, error: dict[str, Any]) -> None:
    """End a run that cannot go on (its next state could not be stored): status
    ``failed`` with ``error`` (``{"message", "kind"}``); unfinished steps are cancelled
    like :func:`cancel` does."""
    _end_unfinished(state, now, RunStatus.FAILED, error)


def _end_unfinished(
    state: RunState, now: datetime, status: RunStatus, error: dict[str, Any]
) -> None:
    """End the run with ``status``: unfinished steps cancelled, unfinished children asked
    to cancel, the run's ``error`` set."""
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


def succeed_after_end(
    state: RunState, step_id: str, attempt: int, output: Any, now: datetime
) -> bool:
    """Record that attempt number ``attempt`` of action ``step_id``, still running when the
    run ended (another branch failed the run: running attempts are not stopped then), has
    succeeded: its call happened, so the step, cancelled by the run's end, becomes
    ``succeeded`` with ``output`` (event ``step.succeeded`` with ``after_run_end``). Step
    state follows the attempt's outcome; the run stays as it ended and nothing downstream
    starts. A re-run or replay then copies the step with its output instead of calling it
    again.

    Returns False (nothing changed) unless the run ended, the step is ``cancelled`` and
    ``attempt`` is its latest attempt. The caller closes the attempt fenced by its token
    in the same write, so only an attempt still open (not cancelled with its run by
    cancel, timeout or ``fail``) is recorded.
    """
    rec = state.steps.get(step_id)
    if (
        not state.status.terminal
        or rec is None
        or rec.status != StepStatus.CANCELLED
        or rec.attempts != attempt
    ):
        return False
    succeed(state, step_id, output, now, attempt=attempt, after_run_end=True)
    return True
