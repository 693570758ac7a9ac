"""Warnings for what runs would silently ignore: unknown config keys, retry on a step that
is never retried, a Respond step the trigger never waits for."""

from __future__ import annotations

import itertools
from typing import Any

from backend.engine.expressions import JsonataChecker
from backend.engine.nodes import control_respond, control_set, trigger_manual, trigger_webhook
from designer_schema import Diagram, Edge, Node, NodeTypeSpec, Position, StaticCatalog
from designer_schema.compiler import compile_diagram
from designer_schema.diagnostics import Diagnostic

ACTION = NodeTypeSpec(
    type="test.action",
    label="Test action",
    kind="action",
    config_schema={"type": "object", "properties": {"url": {"type": "string"}}},
)
OPEN = NodeTypeSpec(
    type="test.open",
    label="Open",
    kind="action",
    config_schema={"type": "object", "properties": {}, "additionalProperties": True},
)
CATALOG = StaticCatalog(
    [
        trigger_webhook.SPEC,
        trigger_manual.SPEC,
        control_respond.SPEC,
        control_set.SPEC,
        ACTION,
        OPEN,
    ]
)


def compile_chain(*nodes: tuple[str, str, dict[str, Any]]) -> list[Diagnostic]:
    diagram = Diagram(
        nodes=[Node(id=i, type=t, position=Position(0, 0), config=c) for i, t, c in nodes],
        edges=[
            Edge(id=f"e{n}", source=a[0], target=b[0])
            for n, (a, b) in enumerate(itertools.pairwise(nodes))
        ],
    )
    _, diagnostics = compile_diagram(diagram, CATALOG, JsonataChecker())
    return diagnostics


def test_unknown_config_keys_are_warned_about_by_field() -> None:
    found = compile_chain(
        ("hook", "trigger.webhook", {"respnd": "respond_node"}),
        ("call", "test.action", {"url": "https://x.test", "retries": 3, "timeout": 5}),
    )
    assert [(d.severity, d.code, d.node_id, d.field) for d in found] == [
        ("warning", "unknown_config_key", "hook", "respnd"),
        ("warning", "unknown_config_key", "call", "retries"),
    ]
    assert "'retries' is not a setting of Test action" in found[1].message


def test_schemas_open_to_any_key_accept_any_key() -> None:
    found = compile_chain(("hook", "trigger.manual", {}), ("o", "test.open", {"anything": 1}))
    assert found == []


def test_retry_on_a_flow_step_is_ignored_and_said_so() -> None:
    found = compile_chain(
        ("hook", "trigger.manual", {}),
        ("set", "control.set", {"mapping": {"a": 1}, "retry": {"max_attempts": 3}}),
        ("call", "test.action", {"retry": {"max_attempts": 3}}),
    )
    assert [(d.code, d.node_id, d.field) for d in found] == [("ignored_setting", "set", "retry")]


def test_a_respond_step_with_a_webhook_answering_immediately_is_ignored() -> None:
    found = compile_chain(
        ("hook", "trigger.webhook", {}),  # respond defaults to "immediately"
        ("reply", "control.respond", {"status": 201}),
    )
    assert [(d.severity, d.code, d.node_id) for d in found] == [
        ("warning", "ignored_step", "reply")
    ]
    assert "Immediately (202 with the run id)" in found[0].message
    assert "When a Respond to Webhook step answers" in found[0].message


def test_a_respond_step_the_webhook_waits_for_is_fine() -> None:
    found = compile_chain(
        ("hook", "trigger.webhook", {"respond": "respond_node"}),
        ("reply", "control.respond", {"status": 201}),
    )
    assert found == []


def test_a_respond_step_without_a_webhook_trigger_is_ignored() -> None:
    found = compile_chain(("start", "trigger.manual", {}), ("reply", "control.respond", {}))
    assert [(d.code, d.node_id) for d in found] == [("ignored_step", "reply")]
    assert "starts with Manual" in found[0].message


def test_warnings_never_block_publishing() -> None:
    diagram = Diagram(
        nodes=[
            Node(id="hook", type="trigger.webhook", position=Position(0, 0), config={"x": 1}),
            Node(id="reply", type="control.respond", position=Position(0, 0), config={}),
        ],
        edges=[Edge(id="e", source="hook", target="reply")],
    )
    graph, diagnostics = compile_diagram(diagram, CATALOG, JsonataChecker())
    assert graph is not None
    assert {d.severity for d in diagnostics} == {"warning"}
