"""Property test of the engine over random acyclic workflows with random branch outcomes.

For any graph and outcome: the run terminates, every step completes at most once, and a
join fires at most once per activation (its ``step.succeeded`` event appears at most once).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import ActionFailed, Sim, compile_dict

KINDS = ["action", "action_err", "if", "set", "join_all", "join_first", "join_n", "delay"]


@st.composite
def workflows(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, bool]]:
    size = draw(st.integers(min_value=1, max_value=9))
    nodes = [node("n0", "trigger.manual")]
    ports: dict[str, list[str]] = {"n0": ["out"]}
    edges = []
    fails: dict[str, bool] = {}
    for i in range(1, size + 1):
        nid = f"n{i}"
        kind = draw(st.sampled_from(KINDS))
        sources = draw(
            st.lists(
                st.sampled_from([f"n{j}" for j in range(i)]), min_size=1, max_size=3, unique=True
            )
        )
        config: dict[str, Any] = {}
        if kind == "if":
            nodes.append(
                node(nid, "control.if", condition=draw(st.sampled_from(["=true", "=false"])))
            )
            ports[nid] = ["true", "false"]
        elif kind == "set":
            nodes.append(node(nid, "control.set", mapping={"i": i}))
            ports[nid] = ["out"]
        elif kind.startswith("join"):
            mode = {"join_all": "all", "join_first": "first", "join_n": "n_of_m"}[kind]
            config = {"mode": mode, "count": draw(st.integers(1, len(sources)))}
            nodes.append(node(nid, "control.join", **config))
            ports[nid] = ["out"]
        elif kind == "delay":
            nodes.append(node(nid, "control.delay", seconds=draw(st.integers(0, 3))))
            ports[nid] = ["out"]
        else:
            extra = {"on_error": "error_port"} if kind == "action_err" else {}
            nodes.append(node(nid, "test.action", **extra))
            ports[nid] = ["out", "error"] if extra else ["out"]
            fails[nid] = draw(st.booleans())
        for src in sources:
            edges.append(edge(src, nid, draw(st.sampled_from(ports[src]))))
    return diagram(nodes, edges), fails


@settings(max_examples=150, deadline=None)
@given(workflows(), st.dictionaries(st.sampled_from([f"n{i}" for i in range(10)]), st.floats(0, 3)))
def test_random_acyclic_runs_terminate_and_complete_each_step_at_most_once(
    wf: tuple[dict[str, Any], dict[str, bool]], durations: dict[str, float]
) -> None:
    d, fails = wf
    graph = compile_dict(d)

    def act(step_id: str) -> Any:
        def fn(_: Any) -> Any:
            if fails.get(step_id):
                raise ActionFailed(f"{step_id} failed")
            return {"from": step_id}

        return fn

    sim = Sim(actions={sid: act(sid) for sid in fails}, durations=durations)
    run = sim.start(graph, {})
    sim.run_all()
    assert run.state.status.terminal
    finished = Counter(sid for _, kind, sid in sim.log if kind in ("step.succeeded", "step.failed"))
    assert all(count == 1 for count in finished.values()), finished
    started = Counter(sid for _, sid in sim.calls)
    assert all(count == 1 for count in started.values()), started
    for step in graph.steps:
        rec = run.state.steps.get(step.id)
        assert rec is None or rec.status.terminal
