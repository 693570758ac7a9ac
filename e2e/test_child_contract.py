"""A For each step's settings say what each child run receives: the item's fields (from the
webhook's body schema, through the Items expression), its index and the step's input.
Screenshot: foreach-child-contract.png."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.api_client import api_client, chain_draft, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import open_settings

pytestmark = pytest.mark.e2e

ORDERS = {
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


def test_foreach_panel_shows_the_child_input(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    api = api_client(server)
    child = api.post("/api/workflows", json={"name": "One order"}).json()["id"]
    hook = node("hook", "trigger.webhook", 0, body_schema=ORDERS)
    each = node("each", "control.foreach", 320, items="=body.orders", workflow_id=child)
    login(page, server)
    open_settings(page, server, chain_draft(api, "All orders", hook, each), "each")
    box = page.locator("#config-panel .child-contract")
    box.wait_for()
    assert box.locator("h3").inner_text() == "Each child run receives"
    fields = dict(
        zip(
            box.locator("dt").all_inner_texts(),
            box.locator("dd").all_inner_texts(),
            strict=True,
        )
    )
    assert fields["item.sku"] == "string" and fields["item.qty"] == "integer", fields
    assert fields["index"] == "integer"
    assert "input.body" in fields
    page.screenshot(path=str(ARTIFACTS_DIR / "foreach-child-contract.png"))
