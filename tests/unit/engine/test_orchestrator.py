"""Golden tests of the pure engine: diagram + input -> step order, outputs, run status."""

from __future__ import annotations

from typing import Any

import pytest

from backend.engine.planner import plan
from backend.engine.states import InvalidTransition, RunStatus, StepStatus
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import ActionFailed, compile_dict, run_graph


def pipeline(condition: str = "=total > 100") -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("set_1", "control.set", mapping={"total": "=body.qty * body.price", "tag": "x"}),
            node("if_1", "control.if", condition=condition),
            node("call", "test.action"),
            node("after", "control.set", mapping={"done": True}),
        ],
        [
            edge("hook", "set_1"),
            edge("set_1", "if_1"),
            edge("if_1", "call", "true"),
            edge("call", "after"),
        ],
    )


def test_sequence_true_branch_runs_every_step_in_order() -> None:
    graph = compile_dict(pipeline())
    state, order = run_graph(graph, {"body": {"qty": 3, "price": 50}})
    assert state.status == RunStatus.SUCCEEDED
    assert order == ["hook", "set_1", "if_1", "call", "after"]
    assert state.steps["set_1"].output == {"total": 150, "tag": "x"}
    assert state.steps["if_1"].ports == ("true",)
    assert state.steps["call"].input == {"total": 150, "tag": "x"}
    assert state.output == {"done": True}


def test_false_branch_not_taken_is_skipped_and_run_succeeds() -> None:
    graph = compile_dict(pipeline())
    state, order = run_graph(graph, {"body": {"qty": 1, "price": 5}})
    assert state.status == RunStatus.SUCCEEDED
    assert order == ["hook", "set_1", "if_1"]
    assert state.steps["call"].status == StepStatus.SKIPPED
    assert state.steps["after"].status == StepStatus.SKIPPED


def test_action_failure_fails_the_run_and_names_the_step() -> None:
    graph = compile_dict(pipeline())

    def boom(_: Any) -> Any:
        raise ActionFailed("remote said no")

    state, _ = run_graph(graph, {"body": {"qty": 3, "price": 50}}, {"call": boom})
    assert state.status == RunStatus.FAILED
    assert state.steps["call"].status == StepStatus.FAILED
    assert state.error == {"step_id": "call", "message": "remote said no", "kind": "test"}
    assert "after" not in state.steps, "nothing downstream of an unhandled failure starts"


def test_expression_error_in_control_step_fails_the_run_with_field() -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("s", "control.set", mapping={"x": "=$number('abc') + {}"}),
        ],
        [edge("hook", "s")],
    )
    state, _ = run_graph(compile_dict(d), {"body": {}})
    assert state.status == RunStatus.FAILED
    assert state.steps["s"].error is not None
    assert state.steps["s"].error["kind"] == "expression_error"


def test_error_port_routes_failure_and_run_continues() -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "test.action", on_error="error_port"),
            node("ok", "control.set", mapping={"path": "ok"}),
            node("handler", "control.set", mapping={"path": "error", "why": "=error.message"}),
        ],
        [edge("hook", "call"), edge("call", "ok"), edge("call", "handler", "error")],
    )

    def boom(_: Any) -> Any:
        raise ActionFailed("nope")

    state, order = run_graph(compile_dict(d), {}, {"call": boom})
    assert state.status == RunStatus.SUCCEEDED
    assert state.steps["handler"].output == {"path": "error", "why": "nope"}
    assert state.steps["ok"].status == StepStatus.SKIPPED
    assert order == ["hook", "call", "handler"]


def test_retry_policy_retries_then_succeeds_with_each_attempt_counted() -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node(
                "call", "test.action", retry={"max_attempts": 3, "initial_interval": 2, "jitter": 0}
            ),
        ],
        [edge("hook", "call")],
    )
    calls: list[int] = []

    def flaky(_: Any) -> Any:
        calls.append(1)
        if len(calls) < 3:
            raise ActionFailed("try again", retryable=True)
        return {"ok": True}

    state, _ = run_graph(compile_dict(d), {}, {"call": flaky})
    assert state.status == RunStatus.SUCCEEDED
    assert state.steps["call"].attempts == 3
    assert len(calls) == 3


def test_parallel_branches_join_all_with_dead_path_elimination() -> None:
    # hook -> if; if.true -> a -> join; hook -> join (second input). if.false goes nowhere.
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("if_1", "control.if", condition="=body.x = 1"),
            node("a", "control.set", mapping={"a": "yes"}),
            node("join", "control.set", mapping={"merged": "=$"}),
            node("after", "control.set", mapping={"ran": True}),
        ],
        [
            edge("hook", "if_1"),
            edge("if_1", "a", "true"),
            edge("a", "join"),
            edge("hook", "join"),
            edge("join", "after"),
        ],
    )
    graph = compile_dict(d)
    state, order = run_graph(graph, {"body": {"x": 1}})
    assert state.status == RunStatus.SUCCEEDED
    assert order.count("join") == 1 and state.steps["after"].output == {"ran": True}
    assert set(state.steps["join"].input) == {"a", "hook"}

    state, order = run_graph(graph, {"body": {"x": 2}})
    assert state.status == RunStatus.SUCCEEDED
    assert state.steps["a"].status == StepStatus.SKIPPED
    assert order.count("join") == 1 and state.steps["after"].output == {"ran": True}


def test_plan_is_pure_and_idempotent() -> None:
    graph = compile_dict(pipeline())
    state, _ = run_graph(graph, {"body": {"qty": 3, "price": 50}})
    result = plan(graph, state.steps)
    assert result.ready == [] and result.skipped == []


def test_transitions_are_enforced() -> None:
    graph = compile_dict(pipeline())
    state, _ = run_graph(graph, {"body": {"qty": 3, "price": 50}})
    with pytest.raises(InvalidTransition):
        state.steps["call"].move(StepStatus.RUNNING)
    with pytest.raises(InvalidTransition):
        state.move(RunStatus.RUNNING)


def test_if_condition_without_equals_is_an_expression() -> None:
    graph = compile_dict(pipeline(condition="total > 100"))
    state, _ = run_graph(graph, {"body": {"qty": 1, "price": 5}})
    assert state.steps["if_1"].ports == ("false",)


def test_set_leaves_out_fields_whose_expression_matched_nothing() -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("s", "control.set", mapping={"qty": "=body.qty", "fixed": None, "n": "=1"}),
            node("if_1", "control.if", condition="qty > 2"),
        ],
        [edge("hook", "s"), edge("s", "if_1")],
    )
    state, _ = run_graph(compile_dict(d), {"body": {}})
    assert state.steps["s"].output == {"fixed": None, "n": 1}
    assert state.status == RunStatus.SUCCEEDED
    assert state.steps["if_1"].ports == ("false",)
