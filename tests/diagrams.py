"""Small builders for diagrams in tests (plain dicts shaped like designer_schema.Diagram)."""

from __future__ import annotations

from typing import Any


def node(
    node_id: str, node_type: str, x: float = 0, y: float = 0, label: str = "", **config: Any
) -> dict[str, Any]:
    """A diagram node dict."""
    return {
        "id": node_id,
        "type": node_type,
        "label": label or node_id,
        "position": {"x": x, "y": y},
        "config": config,
    }


def edge(
    source: str,
    target: str,
    source_port: str = "out",
    target_port: str = "in",
    edge_id: str | None = None,
) -> dict[str, Any]:
    """A diagram edge dict."""
    return {
        "id": edge_id or f"{source}.{source_port}->{target}.{target_port}",
        "source": source,
        "source_port": source_port,
        "target": target,
        "target_port": target_port,
    }


def diagram(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> dict[str, Any]:
    """A diagram dict."""
    return {
        "nodes": nodes,
        "edges": edges,
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


def order_pipeline(http_url: str, *, respond: str = "immediately") -> dict[str, Any]:
    """Webhook -> Set -> If (total > 100) -> HTTP Request (true) -> Respond; false -> Respond.

    The Set maps ``{"customer": body.name, "total": body.qty * body.price}``; the HTTP
    Request POSTs that object to ``http_url``.
    """
    return diagram(
        [
            node("webhook", "trigger.webhook", 40, 100, respond=respond),
            node(
                "set_1",
                "control.set",
                240,
                100,
                mapping={
                    "customer": "=body.name",
                    "total": "=body.qty * body.price",
                    "source": "shop",
                },
            ),
            node("if_1", "control.if", 440, 100, condition="=total > 100"),
            node("http_1", "http.request", 640, 40, method="POST", url=http_url, body="=$"),
            node(
                "respond_big", "control.respond", 840, 40, status=201, body='={"forwarded": status}'
            ),
            node(
                "respond_small",
                "control.respond",
                640,
                200,
                status=200,
                body='={"forwarded": false, "total": total}',
            ),
        ],
        [
            edge("webhook", "set_1"),
            edge("set_1", "if_1"),
            edge("if_1", "http_1", "true"),
            edge("http_1", "respond_big"),
            edge("if_1", "respond_small", "false"),
        ],
    )


def join_fan_out(delays: list[float], **trigger_config: Any) -> dict[str, Any]:
    """The engine-join-concurrent-runs case: webhook -> one branch per delay (Delay, then
    Set ``{"part": k, "n": $trigger.body.n}``) -> Join (all) -> Respond with ``[$.*]``."""
    nodes = [node("hook", "trigger.webhook", **trigger_config)]
    edges = []
    for k, seconds in enumerate(delays, start=1):
        nodes += [
            node(f"wait_{k}", "control.delay", seconds=seconds),
            node(f"part_{k}", "control.set", mapping={"part": k, "n": "=$trigger.body.n"}),
        ]
        edges += [
            edge("hook", f"wait_{k}"),
            edge(f"wait_{k}", f"part_{k}"),
            edge(f"part_{k}", "join"),
        ]
    nodes += [
        node("join", "control.join", mode="all"),
        node("respond", "control.respond", body="=[$.*]"),
    ]
    edges.append(edge("join", "respond"))
    return diagram(nodes, edges)


def join_after_dead_branch() -> dict[str, Any]:
    """The engine-join-dead-branch case: webhook -> If (body.x = 1) -true-> Set a="yes" ->
    Join (all); the webhook also feeds the Join; Join -> Set ``{"joined": $}``."""
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("if_1", "control.if", condition="=body.x = 1"),
            node("set_a", "control.set", mapping={"a": "yes"}),
            node("join", "control.join", mode="all"),
            node("after", "control.set", mapping={"joined": "=$"}),
        ],
        [
            edge("hook", "if_1"),
            edge("if_1", "set_a", "true"),
            edge("set_a", "join"),
            edge("hook", "join"),
            edge("join", "after"),
        ],
    )


ORDERS_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "orders": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
            },
        }
    },
}
"""A webhook body schema: ``orders``, a list of ``{sku, qty}`` (For each and child tests)."""
