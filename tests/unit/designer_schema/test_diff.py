"""The diagram diff: nodes and edges added, removed, changed; fields one by one; positions
ignored."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from designer_schema.diagram import Diagram
from designer_schema.diff import FieldChange, diff_diagrams
from tests.diagrams import diagram, edge, node


def d(nodes: list[dict[str, Any]], edges: list[dict[str, Any]] | None = None) -> Diagram:
    return msgspec.convert(diagram(nodes, edges or []), Diagram)


BASE = d(
    [
        node("hook", "trigger.webhook", 0, 0),
        node("set_1", "control.set", 200, 0, values={"a": 1, "nested": {"x": "=$.x"}}),
        node("http_1", "http.request", 400, 0, url="https://a.example", method="GET"),
    ],
    [edge("hook", "set_1"), edge("set_1", "http_1")],
)


def test_identical_diagrams_have_no_changes() -> None:
    diff = diff_diagrams(BASE, BASE)
    assert diff.empty
    assert (diff.unchanged_nodes, diff.unchanged_edges) == (3, 2)


def test_positions_and_viewport_are_ignored() -> None:
    moved = msgspec.structs.replace(
        BASE,
        nodes=[
            msgspec.structs.replace(n, position=msgspec.structs.replace(n.position, x=999))
            for n in BASE.nodes
        ],
        viewport=msgspec.structs.replace(BASE.viewport, zoom=0.3),
    )
    assert diff_diagrams(BASE, moved).empty


def test_added_removed_and_changed_nodes_with_field_paths() -> None:
    after = d(
        [
            node("hook", "trigger.webhook", 0, 0, label="Incoming order"),
            node("set_1", "control.set", 200, 0, values={"a": 2, "nested": {"y": 1}}),
            node("slack_1", "slack.post_message", 400, 0, text="hi"),
        ],
        [edge("hook", "set_1"), edge("set_1", "slack_1")],
    )
    diff = diff_diagrams(BASE, after)
    kinds = {n.id: n.kind for n in diff.nodes}
    assert kinds == {"hook": "changed", "set_1": "changed", "slack_1": "added", "http_1": "removed"}
    by_id = {n.id: n for n in diff.nodes}
    assert by_id["hook"].fields == [
        FieldChange("label", "changed", "hook", "Incoming order"),
    ]
    assert by_id["set_1"].fields == [
        FieldChange("config.values.a", "changed", 1, 2),
        FieldChange("config.values.nested.x", "removed", "=$.x", None),
        FieldChange("config.values.nested.y", "added", None, 1),
    ]
    assert by_id["http_1"].fields == [] and by_id["slack_1"].fields == []
    assert [(e.kind, e.target) for e in diff.edges] == [("added", "slack_1"), ("removed", "http_1")]
    assert diff.summary() == {
        "nodes_added": 1,
        "nodes_removed": 1,
        "nodes_changed": 2,
        "edges_added": 1,
        "edges_removed": 1,
    }
    assert (diff.unchanged_nodes, diff.unchanged_edges) == (0, 1)


def test_type_change_and_whole_list_values() -> None:
    before = d([node("a", "control.set", items=[1, 2]), node("b", "email.send", to=["x@y.z"])])
    after = d([node("a", "control.set", items=[1, 2]), node("b", "slack.post", to=["x@y.z", "q"])])
    (change,) = diff_diagrams(before, after).nodes
    assert change.id == "b" and change.type == "slack.post"
    assert change.fields == [
        FieldChange("type", "changed", "email.send", "slack.post"),
        FieldChange("config.to", "changed", ["x@y.z"], ["x@y.z", "q"]),
    ]


def test_json_equality_of_numbers_and_booleans() -> None:
    before = d([node("a", "t", n=1, flag=True)])
    assert diff_diagrams(before, d([node("a", "t", n=1.0, flag=True)])).empty
    (change,) = diff_diagrams(before, d([node("a", "t", n=1, flag=1)])).nodes
    assert change.fields == [FieldChange("config.flag", "changed", True, 1)]


def test_edges_are_compared_by_endpoints_not_ids() -> None:
    redrawn = d(
        [node("hook", "trigger.webhook"), node("set_1", "control.set")],
        [edge("hook", "set_1", edge_id="e_99")],
    )
    before = d(
        [node("hook", "trigger.webhook"), node("set_1", "control.set")],
        [edge("hook", "set_1", edge_id="e_1")],
    )
    assert diff_diagrams(before, redrawn).empty
    rewired = d(
        [node("hook", "trigger.webhook"), node("set_1", "control.set")],
        [edge("hook", "set_1", source_port="error", edge_id="e_1")],
    )
    diff = diff_diagrams(before, rewired)
    assert [(e.kind, e.source_port) for e in diff.edges] == [("added", "error"), ("removed", "out")]


def test_duplicate_ids_and_edges_do_not_vanish() -> None:
    before = d([node("a", "t"), node("a", "u")], [edge("a", "b"), edge("a", "b")])
    after = d([node("a", "t")], [edge("a", "b")])
    diff = diff_diagrams(before, after)
    assert [(n.id, n.kind, n.type) for n in diff.nodes] == [("a", "removed", "u")]
    assert [e.kind for e in diff.edges] == ["removed"]


ids = st.sampled_from(["a", "b", "c", "d"])
values = st.one_of(st.integers(-3, 3), st.text(max_size=2), st.booleans())
nodes_strategy = st.dictionaries(ids, st.dictionaries(st.sampled_from(["p", "q"]), values))


@settings(deadline=None)  # a shared CI machine can be slow; correctness is what is tested
@given(nodes_strategy, nodes_strategy)
def test_diff_is_antisymmetric(left: dict[str, Any], right: dict[str, Any]) -> None:
    a = d([node(i, "t", **cfg) for i, cfg in left.items()])
    b = d([node(i, "t", **cfg) for i, cfg in right.items()])
    forward, backward = diff_diagrams(a, b), diff_diagrams(b, a)
    flip = {"added": "removed", "removed": "added", "changed": "changed"}
    assert {(n.id, flip[n.kind]) for n in forward.nodes} == {(n.id, n.kind) for n in backward.nodes}
    same = json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)  # 1 != true
    assert forward.empty == same
