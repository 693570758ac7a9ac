"""The graph of a test run (backend/services/workflows/pinned_graph.py), run by the pure engine."""

from __future__ import annotations

from typing import Any

import pytest

from backend.engine.states import RunStatus, StepStatus
from backend.services.workflows.pinned_graph import (
    LAST_RUN,
    PINNED,
    UnknownStep,
    ancestors,
    plan_test,
)
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import compile_dict, run_graph


def branching() -> dict[str, Any]:
    """hook -> fetch (action) -> if (ok?) -true-> notify (action); -false-> log (Set)."""
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("fetch", "test.action"),
            node("if_1", "control.if", condition="=ok"),
            node("notify", "test.action"),
            node("log", "control.set", mapping={"logged": "=$"}),
        ],
        [
            edge("hook", "fetch"),
            edge("fetch", "if_1"),
            edge("if_1", "notify", "true"),
            edge("if_1", "log", "false"),
        ],
    )


def test_pinned_step_outputs_its_data_and_is_not_executed() -> None:
    graph = compile_dict(branching())
    plan = plan_test(graph, {"fetch": {"ok": True}})
    assert plan.substituted == {"fetch": PINNED}
    assert plan.executes == ["notify"]
    assert plan.graph.content_hash != graph.content_hash

    def never(_: Any) -> Any:
        raise AssertionError("a pinned step must not run")

    state, order = run_graph(plan.graph, {}, {"fetch": never, "notify": lambda data: "sent"})
    assert state.status == RunStatus.SUCCEEDED
    assert order == ["hook", "fetch", "if_1", "notify"]
    assert state.steps["fetch"].output == {"ok": True}
    assert state.steps["notify"].input == {"ok": True}


def test_test_step_keeps_only_the_target_and_its_ancestors() -> None:
    graph = compile_dict(branching())
    assert ancestors(graph, "log") == {"hook", "fetch", "if_1"}
    plan = plan_test(graph, {}, target="log", last_outputs={"fetch": {"ok": False}})
    assert [s.id for s in plan.graph.steps] == ["hook", "fetch", "if_1", "log"]
    assert plan.substituted == {"fetch": LAST_RUN}
    assert plan.executes == []
    state, _ = run_graph(plan.graph, {})
    assert state.steps["log"].output == {"logged": {"ok": False}}
    assert state.steps["log"].status == StepStatus.SUCCEEDED


def test_the_trigger_and_the_target_are_never_replaced() -> None:
    graph = compile_dict(branching())
    plan = plan_test(
        graph, {"hook": {"x": 1}}, target="fetch", last_outputs={"hook": 1, "fetch": 2}
    )
    assert plan.substituted == {}
    assert plan.executes == ["fetch"]


def test_unknown_target_is_refused() -> None:
    with pytest.raises(UnknownStep):
        plan_test(compile_dict(branching()), {}, target="nope")
