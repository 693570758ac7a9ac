"""Golden tests for the Workflow Patterns (van der Aalst et al., workflowpatterns.com).

Each test: a diagram + an input -> the expected step order and outputs, run by the pure
in-memory driver on a fake clock (actions take 1 s unless ``durations`` says otherwise).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from backend.engine.states import RunStatus, StepStatus
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import T0, Sim, compile_dict, run_graph


def _act(step_id: str, **config: Any) -> dict[str, Any]:
    return node(step_id, "test.action", **config)


def _chain(step_id: str) -> Any:
    return lambda data: {"step": step_id, "after": data}


def _tag(step_id: str) -> Any:
    return lambda _: {"from": step_id}


def test_wcp01_sequence() -> None:
    d = diagram(
        [node("hook", "trigger.manual"), _act("a"), _act("b"), _act("c")],
        [edge("hook", "a"), edge("a", "b"), edge("b", "c")],
    )
    actions = {s: _chain(s) for s in "abc"}
    state, order = run_graph(compile_dict(d), {"x": 1}, actions)
    assert state.status == RunStatus.SUCCEEDED
    assert order == ["hook", "a", "b", "c"]
    assert state.output == {
        "step": "c",
        "after": {"step": "b", "after": {"step": "a", "after": {"x": 1}}},
    }


def test_wcp02_parallel_split() -> None:
    d = diagram(
        [node("hook", "trigger.manual"), _act("a"), _act("b"), _act("c")],
        [edge("hook", "a"), edge("hook", "b"), edge("hook", "c")],
    )
    sim = Sim(durations={"a": 3, "b": 1, "c": 2})
    run = sim.start(compile_dict(d), {"x": 1})
    sim.run_all()
    assert run.state.status == RunStatus.SUCCEEDED
    # all three were dispatched together at t0 and ran concurrently: they finish by duration
    assert [c[1] for c in sim.calls] == ["a", "b", "c"]
    assert run.finished == ["hook", "b", "c", "a"]
    assert sim.now == T0 + timedelta(seconds=3)
    assert set(run.state.output) == {"a", "b", "c"}


def _split_join(mode: str = "all", **join_config: Any) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.manual"),
            _act("a"),
            _act("b"),
            _act("c"),
            node("join", "control.join", mode=mode, **join_config),
            node("after", "control.set", mapping={"merged": "=$keys($)"}),
        ],
        [
            edge("hook", "a"),
            edge("hook", "b"),
            edge("hook", "c"),
            edge("a", "join"),
            edge("b", "join"),
            edge("c", "join"),
            edge("join", "after"),
        ],
    )


def test_wcp03_synchronization() -> None:
    actions = {s: _tag(s) for s in "abc"}
    state, order = run_graph(
        compile_dict(_split_join()), {}, actions, durations={"a": 3, "b": 1, "c": 2}
    )
    assert state.status == RunStatus.SUCCEEDED
    assert order == ["hook", "b", "c", "a", "join", "after"]
    assert state.steps["join"].output == {
        "a": {"from": "a"},
        "b": {"from": "b"},
        "c": {"from": "c"},
    }
    assert state.output == {"merged": ["a", "b", "c"]}


def _choice(mode: str) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.manual"),
            node(
                "switch",
                "control.switch",
                cases=["small", "big", "vip"],
                rules={"small": "=amount < 100", "big": "=amount >= 100", "vip": "=vip"},
                mode=mode,
            ),
            _act("small"),
            _act("big"),
            _act("vip"),
            _act("other"),
            node("merge", "control.join"),
            node("after", "control.set", mapping={"arrived": "=$keys($)"}),
        ],
        [
            edge("hook", "switch"),
            edge("switch", "small", "small"),
            edge("switch", "big", "big"),
            edge("switch", "vip", "vip"),
            edge("switch", "other", "default"),
            edge("small", "merge"),
            edge("big", "merge"),
            edge("vip", "merge"),
            edge("other", "merge"),
            edge("merge", "after"),
        ],
    )


def test_wcp04_exclusive_choice() -> None:
    graph = compile_dict(_choice("first"))
    state, order = run_graph(graph, {"amount": 500, "vip": True})
    assert state.steps["switch"].ports == ("big",)
    assert order == ["hook", "switch", "big", "merge", "after"]
    for skipped in ("small", "vip", "other"):
        assert state.steps[skipped].status == StepStatus.SKIPPED
    # value matching without rules, and the default port
    d = diagram(
        [
            node("hook", "trigger.manual"),
            node("switch", "control.switch", value="=kind", cases=["a", "b"]),
            _act("a"),
            _act("b"),
            _act("d"),
        ],
        [
            edge("hook", "switch"),
            edge("switch", "a", "a"),
            edge("switch", "b", "b"),
            edge("switch", "d", "default"),
        ],
    )
    graph = compile_dict(d)
    assert run_graph(graph, {"kind": "b"})[1] == ["hook", "switch", "b"]
    assert run_graph(graph, {"kind": "zzz"})[1] == ["hook", "switch", "d"]


def test_wcp05_simple_merge() -> None:
    graph = compile_dict(_choice("first"))
    state, order = run_graph(graph, {"amount": 5, "vip": False})
    assert order == ["hook", "switch", "small", "merge", "after"]
    assert state.output == {"arrived": "small"}
    assert order.count("merge") == 1


def test_wcp06_multi_choice() -> None:
    graph = compile_dict(_choice("all"))
    state, order = run_graph(graph, {"amount": 500, "vip": True})
    assert state.steps["switch"].ports == ("big", "vip")
    assert order[:2] == ["hook", "switch"] and set(order[2:4]) == {"big", "vip"}
    assert state.steps["small"].status == StepStatus.SKIPPED
    assert state.steps["other"].status == StepStatus.SKIPPED


def test_wcp07_structured_synchronizing_merge() -> None:
    graph = compile_dict(_choice("all"))
    state, order = run_graph(graph, {"amount": 500, "vip": True}, durations={"big": 1, "vip": 5})
    # the merge waits for exactly the two activated branches, then fires once
    assert order == ["hook", "switch", "big", "vip", "merge", "after"]
    assert state.output == {"arrived": ["big", "vip"]}


def test_wcp08_multi_merge() -> None:
    # Railyard steps complete at most once per run, so the part that runs "once per
    # arrival" is a sub-workflow that each branch calls: it runs once per branch.
    child = compile_dict(
        diagram(
            [node("start", "trigger.manual"), _act("shared")],
            [edge("start", "shared")],
        )
    )
    d = diagram(
        [
            node("hook", "trigger.manual"),
            _act("a"),
            _act("b"),
            node("call_a", "control.subworkflow", workflow_id="shared"),
            node("call_b", "control.subworkflow", workflow_id="shared"),
        ],
        [edge("hook", "a"), edge("hook", "b"), edge("a", "call_a"), edge("b", "call_b")],
    )
    sim = Sim(
        actions={"a": lambda _: "A", "b": lambda _: "B", "shared": lambda x: {"got": x}},
        durations={"a": 1, "b": 2},
        workflows={"shared": child},
    )
    run = sim.start(compile_dict(d), {})
    sim.run_all()
    assert run.state.status == RunStatus.SUCCEEDED
    assert [c for c in sim.calls if c[1] == "shared"].__len__() == 2
    assert run.state.output == {"call_a": {"got": "A"}, "call_b": {"got": "B"}}
    assert run.finished == ["hook", "a", "b", "call_a", "call_b"]


def test_wcp09_structured_discriminator() -> None:
    actions = {s: _tag(s) for s in "abc"}
    state, order = run_graph(
        compile_dict(_split_join("first")), {}, actions, durations={"a": 3, "b": 1, "c": 2}
    )
    assert state.status == RunStatus.SUCCEEDED
    # the first arrival (b) fires the join; c and a still finish but never fire it again
    assert order == ["hook", "b", "join", "after", "c", "a"]
    assert state.steps["join"].output == {"b": {"from": "b"}}
    assert order.count("join") == 1


def test_wcp09_n_of_m_join() -> None:
    state, order = run_graph(
        compile_dict(_split_join("n_of_m", count=2)), {}, durations={"a": 3, "b": 1, "c": 2}
    )
    assert order == ["hook", "b", "c", "join", "after", "a"]
    assert set(state.steps["join"].output) == {"b", "c"}


def test_wcp11_implicit_termination() -> None:
    d = diagram(
        [
            node("hook", "trigger.manual"),
            _act("short"),
            _act("long1"),
            _act("long2"),
        ],
        [edge("hook", "short"), edge("hook", "long1"), edge("long1", "long2")],
    )
    state, order = run_graph(compile_dict(d), {}, {"short": lambda _: 1, "long2": lambda _: 2})
    # no end node: the run ends when nothing is left to do, output keyed by the end steps
    assert state.status == RunStatus.SUCCEEDED
    assert order == ["hook", "short", "long1", "long2"]
    assert state.output == {"short": 1, "long2": 2}


def _body() -> Any:
    return compile_dict(
        diagram(
            [
                node("start", "trigger.manual"),
                node("double", "control.set", mapping={"v": "=item * 2"}),
            ],
            [edge("start", "double")],
        )
    )


def _loop(items: Any, **config: Any) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.manual"),
            node("loop", "control.foreach", items=items, workflow_id="body", **config),
            node("after", "control.set", mapping={"results": "=$"}),
        ],
        [edge("hook", "loop"), edge("loop", "after")],
    )


def test_wcp12_multiple_instances_without_synchronization() -> None:
    sim = Sim(workflows={"body": _body()})
    run = sim.start(compile_dict(_loop([1, 2, 3], wait=False)), {})
    sim.run_all(until=T0)
    # the step does not wait for its instances: the run goes on (and here ends) at once
    assert run.state.status == RunStatus.SUCCEEDED
    ids = run.state.steps["loop"].output["run_ids"]
    assert len(ids) == 3
    sim.run_all()
    assert [sim.runs[i].state.output for i in ids] == [{"v": 2}, {"v": 4}, {"v": 6}]


def test_wcp13_multiple_instances_with_a_priori_design_time_knowledge() -> None:
    state, _ = run_graph(compile_dict(_loop([1, 2, 3])), {}, workflows={"body": _body()})
    assert state.status == RunStatus.SUCCEEDED
    assert state.steps["loop"].output == [{"v": 2}, {"v": 4}, {"v": 6}]
    assert state.output == {"results": [{"v": 2}, {"v": 4}, {"v": 6}]}


def test_wcp14_multiple_instances_with_a_priori_run_time_knowledge() -> None:
    graph = compile_dict(_loop("=numbers", concurrency=2))
    body = compile_dict(
        diagram([node("start", "trigger.manual"), _act("work")], [edge("start", "work")])
    )
    sim = Sim(
        actions={"work": lambda x: x["item"] * 10},
        durations={"work": 1},
        workflows={"body": body},
    )
    run = sim.start(graph, {"numbers": [5, 4, 3, 2, 1]})
    sim.run_all()
    assert run.state.steps["loop"].output == [50, 40, 30, 20, 10]
    # concurrency 2: five one-second items take three seconds
    assert sim.now == T0 + timedelta(seconds=3)


def test_wcp16_deferred_choice() -> None:
    d = diagram(
        [
            node("hook", "trigger.manual"),
            node("wait_short", "control.delay", seconds="=short"),
            node("wait_long", "control.delay", seconds="=long"),
            node("choice", "control.join", mode="first"),
            node("after", "control.set", mapping={"winner": "=$keys($)"}),
        ],
        [
            edge("hook", "wait_short"),
            edge("hook", "wait_long"),
            edge("wait_short", "choice"),
            edge("wait_long", "choice"),
            edge("choice", "after"),
        ],
    )
    graph = compile_dict(d)
    state, order = run_graph(graph, {"short": 5, "long": 60})
    assert order == ["hook", "wait_short", "choice", "after", "wait_long"]
    assert state.output == {"winner": "wait_short"}
    state, order = run_graph(graph, {"short": 90, "long": 60})
    assert state.steps["after"].output == {"winner": "wait_long"}
    assert order.count("choice") == 1


def test_wcp19_cancel_task() -> None:
    # A task that is enabled (waiting on its timer) is withdrawn before it starts.
    d = diagram(
        [node("hook", "trigger.manual"), node("wait", "control.delay", seconds=30), _act("task")],
        [edge("hook", "wait"), edge("wait", "task")],
    )
    sim = Sim()
    run = sim.start(compile_dict(d), {})
    assert run.state.status == RunStatus.WAITING
    sim.run_all(until=T0 + timedelta(seconds=10))
    sim.cancel("run-1", "withdrawn")
    sim.run_all()
    assert run.state.status == RunStatus.CANCELLED
    assert run.state.steps["wait"].status == StepStatus.CANCELLED
    assert "task" not in [c[1] for c in sim.calls]
    assert run.state.error == {"message": "withdrawn", "kind": "cancelled"}


def test_wcp20_cancel_case() -> None:
    body = compile_dict(
        diagram(
            [node("start", "trigger.manual"), node("nap", "control.delay", seconds=100), _act("w")],
            [edge("start", "nap"), edge("nap", "w")],
        )
    )
    sim = Sim(workflows={"body": body})
    run = sim.start(compile_dict(_loop([1, 2], concurrency=2)), {})
    sim.run_all(until=T0 + timedelta(seconds=1))
    children = [r for r in sim.runs.values() if r.parent is not None]
    assert len(children) == 2 and all(c.state.status == RunStatus.WAITING for c in children)
    sim.cancel("run-1")
    sim.run_all()
    # the whole case is withdrawn: the run, its loop step and every child run
    assert run.state.status == RunStatus.CANCELLED
    assert all(c.state.status == RunStatus.CANCELLED for c in children)
    assert not [c for c in sim.calls if c[1] == "w"]
