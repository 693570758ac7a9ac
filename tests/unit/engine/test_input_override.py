"""A replay's edited input: a pending step record carrying ``input_override`` runs with it
instead of its predecessor's output (backend/engine/orchestrator.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from backend.engine import orchestrator
from backend.engine.model import RunState, StepRecord
from backend.engine.states import RunStatus, StepStatus
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import compile_dict

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_pending_step_with_an_override_runs_with_the_edited_input() -> None:
    graph = compile_dict(
        diagram(
            [
                node("hook", "trigger.webhook"),
                node("a", "control.set", mapping={"v": "=n"}),
                node("b", "control.set", mapping={"doubled": "=v * 2"}),
            ],
            [edge("hook", "a"), edge("a", "b")],
        )
    )
    state = RunState("r", "w", 1, RunStatus.QUEUED, {"n": 1}, {})
    state.steps["b"] = StepRecord("b", data={orchestrator.INPUT_OVERRIDE: {"v": 21}})
    orchestrator.start(graph, state, NOW)
    assert state.status == RunStatus.SUCCEEDED
    assert state.steps["a"].output == {"v": 1}
    assert state.steps["b"].input == {"v": 21}
    assert state.steps["b"].output == {"doubled": 42}
    assert state.steps["b"].data is None  # consumed
    assert any(e.kind == "step.input_edited" and e.step_id == "b" for e in state.events)


def test_without_an_override_the_input_is_the_predecessors_output() -> None:
    graph = compile_dict(
        diagram(
            [node("hook", "trigger.webhook"), node("a", "control.set", mapping={"v": "=n"})],
            [edge("hook", "a")],
        )
    )
    state = RunState("r", "w", 1, RunStatus.QUEUED, {"n": 3}, {})
    orchestrator.start(graph, state, NOW)
    assert state.steps["a"].input == {"n": 3}
    assert state.steps["a"].status == StepStatus.SUCCEEDED
