"""Property tests of the compiler (hypothesis)."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from designer_schema import (
    DIAGNOSTIC_CODES,
    Diagram,
    Edge,
    JoinSpec,
    Node,
    Position,
    Transition,
    canonical_hash,
)

from ._fakes import CATALOG, compile_

# node type -> (config, output ports) of a valid node of that type
VALID_NODES: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "control.merge": ({}, ("out",)),
    "control.join": ({"mode": "n_of_m", "count": 2}, ("out",)),
    "control.if": ({"condition": "=x > (1)"}, ("true", "false")),
    "control.switch": ({"value": "=kind", "cases": ["a", "b"]}, ("default", "a", "b")),
    "test.risky": ({"retry": {"max_attempts": 2}}, ("out", "error")),
    "http.request": (
        {"url": "https://x.test", "method": "GET", "on_error": "error_port"},
        ("out", "error"),
    ),
}


class Dag(msgspec.Struct):
    diagram: Diagram
    parents: dict[str, str]  # node id -> a parent on a path from the trigger
    outputs: dict[str, tuple[str, ...]]


@st.composite
def dags(draw: st.DrawFn) -> Dag:
    """A random acyclic diagram in which every node is reachable from one trigger."""
    count = draw(st.integers(min_value=0, max_value=12))
    ids = [f"n{i}" for i in range(count + 1)]
    trigger_type = draw(st.sampled_from(["trigger.webhook", "trigger.manual"]))
    kinds = [trigger_type] + [draw(st.sampled_from(sorted(VALID_NODES))) for _ in range(count)]
    outputs: dict[str, tuple[str, ...]] = {ids[0]: ("out",)}
    nodes = [Node(id=ids[0], type=trigger_type)]
    for node_id, node_type in zip(ids[1:], kinds[1:], strict=True):
        config, ports = VALID_NODES[node_type]
        outputs[node_id] = ports
        x = draw(st.floats(-1000, 1000))
        nodes.append(Node(id=node_id, type=node_type, position=Position(x, 0), config=config))

    parents: dict[str, str] = {}
    connections: list[tuple[str, str, str]] = []
    for i in range(1, count + 1):
        parent = ids[draw(st.integers(0, i - 1))]
        parents[ids[i]] = parent
        connections.append((parent, draw(st.sampled_from(outputs[parent])), ids[i]))
        for j in draw(st.lists(st.integers(0, i - 1), max_size=2)):
            connections.append((ids[j], draw(st.sampled_from(outputs[ids[j]])), ids[i]))
    unique = list(dict.fromkeys(connections))
    unique = draw(st.permutations(unique))
    edges = [
        Edge(id=f"e{k}", source=s, source_port=p, target=t) for k, (s, p, t) in enumerate(unique)
    ]
    nodes = draw(st.permutations(nodes))
    return Dag(Diagram(nodes=list(nodes), edges=edges), parents, outputs)


@settings(max_examples=100, deadline=None)
@given(dags())
def test_random_dags_compile_and_keep_every_edge(dag: Dag) -> None:
    graph, diagnostics = compile_(dag.diagram)
    assert diagnostics == []
    assert graph is not None
    assert graph.transitions == [
        Transition(e.source, e.target, e.source_port, e.target_port) for e in dag.diagram.edges
    ]
    assert [s.id for s in graph.steps] == [n.id for n in dag.diagram.nodes]
    assert graph.trigger == "n0"
    assert graph.content_hash == canonical_hash(graph)
    for step in graph.steps:
        spec = CATALOG.get(step.type)
        assert spec is not None
        assert step.type_version == spec.version  # every step pins its node-type version
        if spec.config_join:  # a Join's mode/count are compiled, never read at run time
            assert step.join == JoinSpec(mode="n_of_m", count=2)
        else:
            assert step.join == JoinSpec()


@settings(max_examples=100, deadline=None)
@given(dags(), st.data())
def test_a_back_edge_always_yields_a_cycle(dag: Dag, data: st.DataObject) -> None:
    ids = [n.id for n in dag.diagram.nodes]
    tail = data.draw(st.sampled_from(ids))
    chain = [tail]
    while chain[-1] in dag.parents:
        chain.append(dag.parents[chain[-1]])
    head = data.draw(st.sampled_from(chain))  # an ancestor of tail, or tail itself
    port = data.draw(st.sampled_from(dag.outputs[tail]))
    back = Edge(id="back", source=tail, source_port=port, target=head)
    diagram = msgspec.structs.replace(dag.diagram, edges=[*dag.diagram.edges, back])

    graph, diagnostics = compile_(diagram)

    assert graph is None
    in_cycle = {d.node_id for d in diagnostics if d.code == "cycle"}
    assert {head, tail} <= in_cycle


# --- arbitrary diagrams -----------------------------------------------------------------

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.text(max_size=6).map(lambda s: "=" + s),
    st.text(max_size=6).map(lambda s: "==" + s),
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
config_keys = st.sampled_from(
    [
        "url", "method", "headers", "body", "items", "condition", "value", "cases", "values",
        "status", "retry", "timeout", "join", "on_error", "max_redirects", "payload",
    ]
) | st.text(max_size=4)  # fmt: skip
reserved_values = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "max_attempts": json_values,
            "mode": st.sampled_from(["all", "first", "n_of_m", "x"]),
            "count": st.integers(-2, 4),
            "jitter": st.floats(allow_nan=True),
        },
    ),
)
ids = st.sampled_from(["a", "b", "c", "t", "", "n.1"])
node_types = st.sampled_from(
    [
        "trigger.webhook", "trigger.manual", "control.set", "control.if", "control.switch",
        "http.request", "webhook.respond", "test.risky", "control.merge", "unknown.type",
    ]
)  # fmt: skip
ports = st.sampled_from(["out", "in", "true", "false", "default", "error", "a", "zz"])

arbitrary_nodes = st.builds(
    Node,
    id=ids,
    type=node_types,
    label=st.text(max_size=5),
    position=st.builds(Position, st.floats(allow_nan=True), st.floats()),
    config=st.dictionaries(config_keys, json_values | reserved_values, max_size=5),
)
arbitrary_edges = st.builds(
    Edge,
    id=st.sampled_from(["e1", "e2", "e3", "e4"]),
    source=ids,
    target=ids,
    source_port=ports,
    target_port=ports,
)
arbitrary_diagrams = st.builds(
    Diagram,
    nodes=st.lists(arbitrary_nodes, max_size=6),
    edges=st.lists(arbitrary_edges, max_size=8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arbitrary_diagrams)
def test_compile_never_raises_and_only_reports(diagram: Diagram) -> None:
    graph, diagnostics = compile_(diagram)

    assert {d.code for d in diagnostics} <= set(DIAGNOSTIC_CODES)
    has_errors = any(d.severity == "error" for d in diagnostics)
    assert (graph is None) == has_errors
    if graph is not None:
        assert graph.content_hash == canonical_hash(graph)
    assert compile_(diagram) == (graph, diagnostics)  # deterministic
