"""An attempt that completes after another branch failed its run: its step shows the
call's success with its output, and nothing downstream starts
(backend/engine/run_end.py ``succeed_after_end``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backend.engine import orchestrator
from backend.engine.model import RunState
from backend.engine.outcomes import AttemptFailed
from backend.engine.states import InvalidTransition, RunStatus, StepStatus
from designer_schema.graph import WorkflowGraph
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import T0, compile_dict

LATER = T0 + timedelta(seconds=2)


def graph() -> WorkflowGraph:
    return compile_dict(
        diagram(
            [
                node("hook", "trigger.webhook"),
                node("a", "test.action"),
                node("b", "test.action"),
                node("join", "control.join", mode="all"),
            ],
            [edge("hook", "a"), edge("hook", "b"), edge("a", "join"), edge("b", "join")],
        )
    )


def failed_while_b_runs(g: WorkflowGraph) -> RunState:
    """A fails the run while B's first attempt is running."""
    state = RunState(
        run_id="r1",
        workflow_id="wf-1",
        version_number=1,
        status=RunStatus.QUEUED,
        input={},
        steps={},
    )
    assert sorted(orchestrator.start(g, state, T0)) == ["a", "b"]
    for sid in ("a", "b"):
        state.steps[sid].move(StepStatus.RUNNING)
        state.steps[sid].attempts = 1
    error = AttemptFailed({"message": "500", "kind": "http_error"}, retryable=False)
    orchestrator.record_outcome(g, state, "a", error, T0)
    assert state.status == RunStatus.FAILED
    assert state.steps["b"].status == StepStatus.CANCELLED
    return state


def test_a_call_completed_after_the_run_failed_is_shown_succeeded() -> None:
    g = graph()
    state = failed_while_b_runs(g)
    state.events.clear()
    assert orchestrator.succeed_after_end(state, "b", 1, {"charged": True}, LATER)
    rec = state.steps["b"]
    assert rec.status == StepStatus.SUCCEEDED and rec.output == {"charged": True}
    assert rec.finished_at == LATER and "b" in state.changed
    assert [(e.kind, e.step_id, e.data) for e in state.events] == [
        ("step.succeeded", "b", {"attempt": 1, "after_run_end": True})
    ]
    # the run stays failed and nothing downstream starts
    assert state.status == RunStatus.FAILED and state.error is not None
    assert state.error["step_id"] == "a"
    assert "join" not in state.steps or state.steps["join"].status != StepStatus.READY
    # recorded once: a second completion changes nothing
    assert not orchestrator.succeed_after_end(state, "b", 1, {"charged": True}, LATER)


def test_only_the_latest_attempt_of_a_cancelled_step_in_an_ended_run() -> None:
    g = graph()
    state = failed_while_b_runs(g)
    assert not orchestrator.succeed_after_end(state, "b", 0, {}, LATER)  # an older attempt
    assert not orchestrator.succeed_after_end(state, "a", 1, {}, LATER)  # failed, not cancelled
    assert state.steps["b"].status == StepStatus.CANCELLED

    active = RunState(
        run_id="r2",
        workflow_id="wf-1",
        version_number=1,
        status=RunStatus.QUEUED,
        input={},
        steps={},
    )
    orchestrator.start(g, active, T0)
    assert not orchestrator.succeed_after_end(active, "b", 0, {}, LATER)  # the run goes on


def test_other_terminal_steps_never_leave() -> None:
    g = graph()
    state = failed_while_b_runs(g)
    with pytest.raises(InvalidTransition):
        state.steps["a"].move(StepStatus.SUCCEEDED)
    state.steps["b"].move(StepStatus.SUCCEEDED)
    with pytest.raises(InvalidTransition):
        state.steps["b"].move(StepStatus.CANCELLED)
