"""What a For each / Sub-workflow child run receives, inferred from the parent diagram."""

from __future__ import annotations

from typing import Any

import msgspec

from backend.services.workflows.expression_data import child_input
from designer_schema.diagram import Diagram
from tests.diagrams import ORDERS_BODY as ORDERS
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import CATALOG


def _diagram(call: dict[str, Any]) -> Diagram:
    hook = node("hook", "trigger.webhook", body_schema=ORDERS)
    return msgspec.convert(diagram([hook, call], [edge("hook", call["id"])]), Diagram)


def test_foreach_child_gets_item_index_and_input() -> None:
    call = node("each", "control.foreach", items="=body.orders", workflow_id="w")
    schema = child_input(_diagram(call), CATALOG, "each")
    assert schema is not None
    assert schema["properties"]["item"] == ORDERS["properties"]["orders"]["items"]
    assert schema["properties"]["index"] == {"type": "integer"}
    assert "body" in schema["properties"]["input"]["properties"]


def test_subworkflow_child_gets_its_input_or_the_step_input() -> None:
    whole = child_input(
        _diagram(node("sub", "control.subworkflow", workflow_id="w")), CATALOG, "sub"
    )
    assert whole is not None and "body" in whole["properties"]
    part = node("sub", "control.subworkflow", workflow_id="w", input="=body.orders")
    assert child_input(_diagram(part), CATALOG, "sub") == ORDERS["properties"]["orders"]


def test_other_steps_start_no_children() -> None:
    assert child_input(_diagram(node("s", "control.set", mapping=[])), CATALOG, "s") is None


def _child(mapping: list[dict[str, Any]], input_schema: Any = None) -> Diagram:
    start = node("start", "trigger.manual")
    if input_schema is not None:
        start["config"]["input_schema"] = input_schema
    shape = node("shape", "control.set", mapping=mapping)
    return msgspec.convert(diagram([start, shape], [edge("start", "shape")]), Diagram)


def test_the_run_input_schema_types_a_manual_trigger_that_declares_none() -> None:
    from backend.engine.expression_paths import JsonataReader
    from backend.engine.expressions import JsonataChecker
    from designer_schema.compiler import compile_diagram
    from designer_schema.dataflow import DataFlow, declares_input

    sent = child_input(
        _diagram(node("each", "control.foreach", items="=body.orders", workflow_id="w")),
        CATALOG,
        "each",
    )
    reads_sku = _child([{"name": "sku", "value": "=sku"}])
    assert declares_input(reads_sku, CATALOG) is False
    flow = DataFlow.of_diagram(reads_sku, CATALOG, JsonataReader(), sent)
    assert flow.output_schema("start") is sent
    assert flow.input_schema("shape")["properties"]["item"]["properties"]["sku"]
    checker, reader = JsonataChecker(), JsonataReader()
    # untyped, anything goes; with what the For each sends, `sku` is not there
    assert compile_diagram(reads_sku, CATALOG, checker, reader)[0] is not None
    graph, found = compile_diagram(reads_sku, CATALOG, checker, reader, sent)
    assert graph is None and [(d.code, d.node_id) for d in found] == [("unknown_field", "shape")]
    right = _child([{"name": "sku", "value": "=item.sku"}])
    assert compile_diagram(right, CATALOG, checker, reader, sent)[0] is not None
    # a declared input schema says so; a webhook trigger types its own output
    assert declares_input(_child([], {"type": "object"}), CATALOG) is True
    assert declares_input(_diagram(node("s", "control.set", mapping=[])), CATALOG) is None
