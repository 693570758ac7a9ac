"""What a For each / Sub-workflow child run receives, inferred from the parent diagram."""

from __future__ import annotations

from typing import Any

import msgspec

from backend.services.expression_data import child_input
from designer_schema.diagram import Diagram
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import CATALOG

ORDERS = {
    "type": "object",
    "properties": {
        "orders": {
            "type": "array",
            "items": {"type": "object", "properties": {"sku": {"type": "string"}}},
        }
    },
}


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
