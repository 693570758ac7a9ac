"""The publish-time check of literal node configs against their node types' config
Structs (backend/services/workflows/config_checks.py): a value the Struct refuses is an
``invalid_config`` error on the node and the field; expressions are left to run time."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from backend.engine.expressions import JsonataChecker
from backend.services.connectors.node_reference import builtin_catalog
from backend.services.workflows.config_checks import config_diagnostics
from designer_schema.compiler import compile_diagram
from designer_schema.diagram import Diagram
from tests.diagrams import diagram, edge, node

CATALOG = builtin_catalog()
WORKFLOW = "0b7e3f6e-2a41-4a4e-9d7f-1f1f9f1f1f1f"


def _found(step_type: str, **config: Any) -> list[tuple[str, str, str | None]]:
    d = diagram(
        [node("start", "trigger.manual"), node("step", step_type, **config)],
        [edge("start", "step")],
    )
    graph, diagnostics = compile_diagram(msgspec.convert(d, Diagram), CATALOG, JsonataChecker())
    assert graph is not None, diagnostics
    return [(f.code, f.node_id or "", f.field) for f in config_diagnostics(graph, CATALOG)]


@pytest.mark.parametrize(
    ("step_type", "config", "field"),
    [
        (
            "control.foreach",
            {"items": [1], "workflow_id": WORKFLOW, "concurrency": 0},
            "concurrency",
        ),
        ("control.respond", {"status": 700}, "status"),
        ("control.delay", {"seconds": -1}, "seconds"),
        ("http.request", {"url": "http://example.test", "max_pages": 0}, "max_pages"),
        ("http.request", {"url": "http://example.test", "request_timeout": 0}, "request_timeout"),
    ],
)
def test_a_literal_its_struct_refuses_is_an_error_on_the_node_and_field(
    step_type: str, config: dict[str, Any], field: str
) -> None:
    assert _found(step_type, **config) == [("invalid_config", "step", field)]


def test_expressions_and_fitting_literals_pass() -> None:
    assert _found("control.foreach", items="=$.list", workflow_id=WORKFLOW, concurrency=3) == []
    assert _found("control.respond", status="=code", body=None) == []
    assert _found("control.switch", cases=["a"], rules={"a": "=x > 1"}, mode="all") == []
    assert _found("control.set", mapping=[{"name": "a", "value": "=x"}]) == []
    assert _found("http.request", url="=base & '/x'", max_pages=3) == []


def test_a_trigger_is_checked_too() -> None:
    d = diagram([node("tick", "trigger.schedule", cron="* * * * *", misfire_grace=-1)], [])
    graph, diagnostics = compile_diagram(msgspec.convert(d, Diagram), CATALOG, JsonataChecker())
    assert graph is not None, diagnostics
    [found] = config_diagnostics(graph, CATALOG)
    assert (found.node_id, found.field) == ("tick", "misfire_grace")
    assert found.message.startswith("invalid config: misfire_grace: ")


def test_a_connector_trigger_is_read_without_the_products_own_keys() -> None:
    """The RabbitMQ trigger's Struct forbids unknown fields; the product's polling keys
    are not the connector's (its code never sees them), so they are not refused."""
    for config in ({}, {"include_existing": True}):
        amqp = node("t", "amqp.message_received", url="amqp://broker/", queue="q", **config)
        graph, diagnostics = compile_diagram(
            msgspec.convert(diagram([amqp], []), Diagram), CATALOG, JsonataChecker()
        )
        assert graph is not None, diagnostics
        assert config_diagnostics(graph, CATALOG) == []
