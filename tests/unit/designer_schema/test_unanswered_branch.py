"""A Webhook waiting for a Respond step warns about every branch that can end without one."""

from __future__ import annotations

from typing import Any

import msgspec

from backend.engine.expressions import JsonataChecker
from designer_schema.compiler import compile_diagram
from designer_schema.diagram import Diagram
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import CATALOG


def _warnings(d: dict[str, Any]) -> set[tuple[str | None, str]]:
    _, diagnostics = compile_diagram(msgspec.convert(d, Diagram), CATALOG, JsonataChecker())
    return {(x.node_id, x.message) for x in diagnostics if x.code == "unanswered_branch"}


def _flow(respond: str, *, false_branch: bool) -> dict[str, Any]:
    nodes = [
        node("hook", "trigger.webhook", respond=respond),
        node("check", "control.if", condition="=body.ok"),
        node("answer", "control.respond", body="=body"),
        node("after", "control.set", mapping=[{"name": "done", "value": True}]),
    ]
    edges = [edge("hook", "check"), edge("check", "answer", "true"), edge("answer", "after")]
    if false_branch:
        nodes.append(node("log", "control.set", mapping=[{"name": "x", "value": 1}]))
        edges.append(edge("check", "log", "false"))
    return diagram(nodes, edges)


def test_unconnected_false_port_is_an_unanswered_branch() -> None:
    found = _warnings(_flow("respond_node", false_branch=False))
    assert [n for n, _ in found] == ["check"]
    assert "'false' port" in next(iter(found))[1]


def test_a_branch_ending_without_respond_is_named_where_it_ends() -> None:
    found = _warnings(_flow("respond_node", false_branch=True))
    assert [n for n, _ in found] == ["log"]


def test_no_warning_when_the_webhook_does_not_wait_for_a_respond_step() -> None:
    assert _warnings(_flow("last_step", false_branch=False)) == set()


def test_no_respond_step_at_all_warns_at_the_end() -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook", respond="respond_node"),
            node("s", "control.set", mapping={}),
        ],
        [edge("hook", "s")],
    )
    assert [n for n, _ in _warnings(d)] == ["s"]
