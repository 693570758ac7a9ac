"""A tiny catalog, a fake expression checker and diagram builders for compiler tests."""

from __future__ import annotations

from typing import Any

from designer_schema import (
    Diagnostic,
    Diagram,
    Edge,
    Node,
    NodeTypeSpec,
    Position,
    StaticCatalog,
    WorkflowGraph,
    compile_diagram,
)


class ParenChecker:
    """Fake ExpressionChecker: flags unbalanced parentheses; records what it was asked."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def check(self, source: str) -> str | None:
        self.seen.append(source)
        depth = 0
        for index, char in enumerate(source):
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth < 0:
                    return f"unexpected ')' at position {index}"
        return "unclosed '('" if depth else None


WEBHOOK = NodeTypeSpec(
    type="trigger.webhook",
    label="Webhook",
    kind="trigger",
    inputs=("in",),  # ignored: triggers never have inputs
    config_schema={
        "type": "object",
        "properties": {"method": {"type": "string", "enum": ["GET", "POST"]}},
    },
)
MANUAL = NodeTypeSpec(type="trigger.manual", label="Manual", kind="trigger")
SET = NodeTypeSpec(
    type="control.set",
    label="Set",
    kind="control",
    config_schema={
        "type": "object",
        "properties": {"values": {"type": "object"}, "keep_input": {"type": "boolean"}},
        "required": ["values"],
    },
    expression_fields=("values",),
)
IF = NodeTypeSpec(
    type="control.if",
    label="If",
    kind="control",
    outputs=("true", "false"),
    config_schema={
        "type": "object",
        "properties": {"condition": {"type": "boolean"}},
        "required": ["condition"],
    },
    expression_fields=("condition",),
)
SWITCH = NodeTypeSpec(
    type="control.switch",
    label="Switch",
    kind="control",
    outputs=("default",),
    config_schema={
        "type": "object",
        "properties": {"value": {"type": "string"}, "cases": {"type": "array"}},
        "required": ["value"],
    },
    expression_fields=("value",),
    dynamic_outputs="cases",
)
HTTP = NodeTypeSpec(
    type="http.request",
    label="HTTP request",
    kind="action",
    config_schema={
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "method": {"type": "string", "enum": ["GET", "POST", "PUT", "DELETE"]},
            "headers": {"type": "object"},
            "body": {},
            "items": {"type": "array"},
            "max_redirects": {"type": "integer"},
            "ratio": {"type": "number"},
            "label_text": {"type": "string"},
            "payload": {"type": ["object", "null"]},
        },
        "required": ["url", "method"],
    },
    expression_fields=("url", "headers", "body", "items"),
)
RESPOND = NodeTypeSpec(
    type="webhook.respond",
    label="Respond to webhook",
    kind="action",
    outputs=(),
    config_schema={
        "type": "object",
        "properties": {"status": {"type": "integer"}, "body": {}},
    },
    expression_fields=("body",),
)
RISKY = NodeTypeSpec(type="test.risky", label="Risky", kind="action", error_port=True)
MERGE = NodeTypeSpec(type="control.merge", label="Merge", kind="control")
JOIN = NodeTypeSpec(
    type="control.join",
    label="Join",
    kind="control",
    version=2,  # a node type at its second version: steps pin 2
    config_schema={
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["all", "first", "n_of_m"]},
            "count": {"type": "integer"},
        },
    },
    config_join=True,
)

CATALOG = StaticCatalog([WEBHOOK, MANUAL, SET, IF, SWITCH, HTTP, RESPOND, RISKY, MERGE, JOIN])


def node(
    node_id: str, node_type: str, *, at: tuple[float, float] = (0.0, 0.0), **config: Any
) -> Node:
    return Node(id=node_id, type=node_type, position=Position(*at), config=config)


def spec(node_type: str) -> NodeTypeSpec:
    found = CATALOG.get(node_type)
    assert found is not None
    return found


def edge(
    source: str, target: str, source_port: str = "out", target_port: str = "in", *, id: str = ""
) -> Edge:
    return Edge(
        id=id or f"{source}.{source_port}->{target}.{target_port}",
        source=source,
        target=target,
        source_port=source_port,
        target_port=target_port,
    )


def compile_(diagram: Diagram) -> tuple[WorkflowGraph | None, list[Diagnostic]]:
    return compile_diagram(diagram, CATALOG, ParenChecker())


def codes(diagnostics: list[Diagnostic]) -> list[str]:
    return [d.code for d in diagnostics]


def only(diagnostics: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == code]


def happy_diagram() -> Diagram:
    """webhook -> set -> if -> http (true) / respond (false)."""
    return Diagram(
        nodes=[
            node("hook", "trigger.webhook", method="POST"),
            node(
                "prepare",
                "control.set",
                at=(100, 0),
                values={"total": "=$sum(body.items.price)", "currency": "EUR"},
            ),
            node("check", "control.if", at=(200, 0), condition="=prepare.total > 100"),
            node(
                "notify",
                "http.request",
                at=(300, -50),
                url="https://example.test/hook",
                method="POST",
                headers={"X-Token": "=trigger.headers.token"},
                body={"total": "=prepare.total", "note": "==not an expression"},
                retry={"max_attempts": 3, "initial_interval": 2},
                timeout=30,
            ),
            node("reply", "webhook.respond", at=(300, 50), status=200, body="=prepare"),
        ],
        edges=[
            edge("hook", "prepare", id="e1"),
            edge("prepare", "check", id="e2"),
            edge("check", "notify", "true", id="e3"),
            edge("check", "reply", "false", id="e4"),
        ],
    )
