"""A For each step's settings say what each child run receives: the item's fields (from the
webhook's body schema, through the Items expression), its index and the step's input;
copied as the child's Manual trigger's Input schema, it makes a child reading a field the
contract lacks an error in its designer and a refused publish. Screenshots:
foreach-child-contract.png, child-contract-checked.png."""

from __future__ import annotations

from typing import Any

import pytest
from railyard_client import Unprocessable

from e2e.api_client import api_client, chain_draft, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import open_settings, press, wait_saved
from tests.diagrams import ORDERS_BODY as ORDERS

pytestmark = pytest.mark.e2e


def test_foreach_panel_shows_the_child_input(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    api = api_client(server)
    child = api.create_workflow("One order").id
    hook = node("hook", "trigger.webhook", 0, body_schema=ORDERS)
    each = node("each", "control.foreach", 320, items="=body.orders", workflow_id=child)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
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

    # the contract, copied into the child's Manual trigger
    box.get_by_role("button", name="Copy as input schema").click()
    box.locator(".child-contract-copy").filter(has_text="Copied").wait_for()
    schema_text = page.evaluate("() => navigator.clipboard.readText()")
    shape = node("shape", "control.set", 320, mapping=[{"name": "sku", "value": "=sku"}])
    draft = {
        "nodes": [node("start", "trigger.manual", 0), shape],
        "edges": [{"id": "e0", "source": "start", "target": "shape"}],
        "schema_version": 1,
    }
    api.save_draft(child, draft)
    form = open_settings(page, server, child, "start")
    form.locator('[data-field="input_schema"]').fill(schema_text)
    # reading `sku` where each child gets `item.sku`: an error, and publishing refuses it
    page.locator("#diagnostics li.diagnostic").filter(has_text="no field sku").wait_for()
    page.screenshot(path=str(ARTIFACTS_DIR / "child-contract-checked.png"))
    press(page, "Control+s")
    wait_saved(page)
    with pytest.raises(Unprocessable) as refused:
        api.publish(child)
    assert "sku" in str(refused.value.body["diagnostics"]), refused.value.body
    # reading what the contract has publishes
    stored = api.get_workflow(child).draft
    assert stored is not None and stored["nodes"][0]["config"]["input_schema"]["properties"]["item"]
    stored["nodes"][1]["config"]["mapping"] = [{"name": "sku", "value": "=item.sku"}]
    api.save_draft(child, stored)
    assert api.publish(child).version.version == 1


def test_child_without_schema_is_typed_by_its_callers(
    page: Any, railyard_server: RailyardServer
) -> None:
    """A child whose Manual trigger declares nothing: its trigger's settings list what the
    For each in the parent sends and say where it came from, its expressions are checked
    against it live, and the parent's publish refuses the child version reading `sku`.
    Screenshot: child-input-inferred.png."""
    server = railyard_server
    api = api_client(server)
    shape = node("shape", "control.set", 320, mapping=[{"name": "sku", "value": "=sku"}])
    child = chain_draft(api, "One order (inferred)", node("start", "trigger.manual", 0), shape)
    api.publish(child)
    hook = node("hook", "trigger.webhook", 0, body_schema=ORDERS)
    each = node("each", "control.foreach", 320, items="=body.orders", workflow_id=child)
    each["label"] = "Each order"
    parent = chain_draft(api, "All orders (inferred)", hook, each)
    with pytest.raises(Unprocessable) as refused:
        api.publish(parent)
    diagnostics = refused.value.body["diagnostics"]
    [problem] = [d for d in diagnostics if d["code"] == "child_contract"]
    assert "'One order (inferred)'" in problem["message"] and "no field sku" in problem["message"]

    login(page, server)
    form = open_settings(page, server, child, "start")
    box = form.locator(".inferred-input")
    box.wait_for()
    assert box.locator(".inferred-from").inner_text() == (
        "from the For each “Each order” in All orders (inferred)"
    )
    fields = dict(
        zip(box.locator("dt").all_inner_texts(), box.locator("dd").all_inner_texts(), strict=True)
    )
    assert fields["item.sku"] == "string" and fields["index"] == "integer", fields
    page.locator("#diagnostics li.diagnostic").filter(has_text="no field sku").wait_for()
    page.screenshot(path=str(ARTIFACTS_DIR / "child-input-inferred.png"))
