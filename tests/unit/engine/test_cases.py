"""The shared engine cases (cases/engine-*.md) as golden tests of the pure engine.

engine-retry-no-duplicate needs the HTTP action and a real endpoint: it lives in
tests/integration/test_engine_cases.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from backend.engine.states import RunStatus, StepStatus
from tests.diagrams import diagram, edge, join_after_dead_branch, join_fan_out, node
from tests.unit.engine.driver import ActionFailed, Sim, compile_dict, run_graph


def test_engine_join_dead_branch() -> None:
    graph = compile_dict(join_after_dead_branch())
    state, order = run_graph(graph, {"body": {"x": 1}})
    assert state.status == RunStatus.SUCCEEDED
    assert order.count("join") == 1 and order[-1] == "after"
    assert state.output == {"joined": {"set_a": {"a": "yes"}, "hook": {"body": {"x": 1}}}}

    state, order = run_graph(graph, {"body": {"x": 2}})
    assert state.status == RunStatus.SUCCEEDED
    assert state.steps["set_a"].status == StepStatus.SKIPPED
    assert order.count("join") == 1 and order[-1] == "after"
    assert state.output == {"joined": {"hook": {"body": {"x": 2}}}}


def _symmetry(a_first: bool) -> dict[str, Any]:
    edges = [edge("a", "join"), edge("b", "join")]
    return diagram(
        [
            node("hook", "trigger.manual"),
            node("a", "test.action"),
            node("wait_b", "control.delay", seconds=0.2),
            node("b", "test.action"),
            node("join", "control.join"),
        ],
        [
            edge("hook", "a"),
            edge("hook", "wait_b"),
            edge("wait_b", "b"),
            *(edges if a_first else edges[::-1]),
        ],
    )


def test_engine_join_wiring_symmetry() -> None:
    outputs = []
    for a_first in (True, False):
        sim = Sim(actions={"a": lambda _: [], "b": lambda _: {"b": 1}}, durations={"a": 0.01})
        run = sim.start(compile_dict(_symmetry(a_first)), {})
        sim.run_all()
        assert run.state.status == RunStatus.SUCCEEDED
        assert run.finished.count("join") == 1
        assert run.finished.index("join") > run.finished.index("b")
        assert run.state.steps["join"].started_at is not None
        assert run.state.steps["join"].started_at >= run.state.steps["b"].finished_at  # type: ignore[operator]
        outputs.append(run.state.steps["join"].output)
    # the documented shape: {predecessor step id: its output}, whatever the wiring
    assert outputs[0] == outputs[1] == {"a": [], "b": {"b": 1}}


def test_engine_join_concurrent_runs() -> None:
    graph = compile_dict(join_fan_out([2.0, 0.0, 1.0, 0.0]))
    sim = Sim()
    runs = [sim.start(graph, {"body": {"n": n}}, run_id=f"run-{n}") for n in (1, 2, 3)]
    sim.run_all()
    for n, run in zip((1, 2, 3), runs, strict=True):
        assert run.state.status == RunStatus.SUCCEEDED
        assert run.finished.count("join") == 1
        body = run.state.response["body"]  # type: ignore[index]
        assert sorted(p["part"] for p in body) == [1, 2, 3, 4]
        assert {p["n"] for p in body} == {n}


def _loop_parent() -> Any:
    return compile_dict(
        diagram(
            [
                node("hook", "trigger.manual"),
                node("loop", "control.foreach", items="=items", workflow_id="body"),
                node("done", "test.action"),
            ],
            [edge("hook", "loop"), edge("loop", "done")],
        )
    )


def _loop_body() -> Any:
    return compile_dict(
        diagram(
            [node("start", "trigger.manual"), node("call", "test.action")], [edge("start", "call")]
        )
    )


@pytest.mark.parametrize(
    ("items", "expected"),
    [([1, 2, 3], [{"ok": True}, [], {"ok": True}]), ([], [])],
    ids=["three-items", "empty-list"],
)
def test_engine_loop_empty(items: list[int], expected: list[Any]) -> None:
    sim = Sim(
        actions={
            "call": lambda x: [] if x["item"] == 2 else {"ok": True},
            "done": lambda x: {"loop_output": x},
        },
        workflows={"body": _loop_body()},
    )
    run = sim.start(_loop_parent(), {"items": items})
    sim.run_all()
    assert run.state.status == RunStatus.SUCCEEDED
    assert [c[1] for c in sim.calls].count("call") == len(items)
    assert [c[1] for c in sim.calls].count("done") == 1
    assert run.state.steps["loop"].output == expected
    assert run.state.output == {"loop_output": expected}


def _child(fail_after_wait: bool) -> Any:
    nodes = [node("start", "trigger.manual"), node("boom", "test.action")]
    edges = [edge("start", "boom")]
    if fail_after_wait:
        nodes.insert(1, node("nap", "control.delay", seconds=1))
        edges = [edge("start", "nap"), edge("nap", "boom")]
    return compile_dict(diagram(nodes, edges))


def _parent(error_branch: bool) -> Any:
    call = node("call", "control.subworkflow", workflow_id="child")
    nodes = [node("hook", "trigger.manual"), call, node("set", "control.set", mapping={"x": 1})]
    edges = [edge("hook", "call"), edge("call", "set")]
    if error_branch:
        call["config"]["on_error"] = "error_port"
        nodes.append(node("handler", "control.set", mapping={"why": "=error.message"}))
        edges.append(edge("call", "handler", "error"))
    return compile_dict(diagram(nodes, edges))


def _boom(_: Any) -> Any:
    raise ActionFailed("boom")


@pytest.mark.parametrize("fail_after_wait", [True, False], ids=["after-wait", "before-wait"])
def test_engine_subworkflow_failure_after_wait(fail_after_wait: bool) -> None:
    sim = Sim(actions={"boom": _boom}, workflows={"child": _child(fail_after_wait)})
    run = sim.start(_parent(error_branch=False), {})
    if fail_after_wait:
        assert run.state.status == RunStatus.WAITING
    sim.run_all()
    child_id = run.state.children["call"][0].run_id
    assert sim.runs[child_id].state.status == RunStatus.FAILED
    assert run.state.status == RunStatus.FAILED
    call = run.state.steps["call"]
    assert call.status == StepStatus.FAILED
    assert call.error is not None
    assert call.error["message"] == "boom" and call.error["child_run_id"] == child_id
    assert "set" not in run.state.steps or run.state.steps["set"].status != StepStatus.SUCCEEDED
    assert "set" not in run.finished

    sim = Sim(actions={"boom": _boom}, workflows={"child": _child(fail_after_wait)})
    run = sim.start(_parent(error_branch=True), {})
    sim.run_all()
    assert run.state.status == RunStatus.SUCCEEDED
    assert run.state.steps["handler"].output == {"why": "boom"}
    assert run.state.steps["set"].status == StepStatus.SKIPPED
