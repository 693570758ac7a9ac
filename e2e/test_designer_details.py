"""Details a first-time user trips over, each as the person meets it.

- Quick-add ranks exact and leading matches first: "http" + Enter adds HTTP Request (not
  Respond to Webhook, whose description mentions HTTP).
- The Set keeps its fields in the order typed: after a reload the rows are in that order,
  the stored draft holds an ordered list, and a webhook answering with the Set's output
  has its keys in that order too. Screenshot: designer-set-order.png.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import (
    body_point,
    diagram,
    new_workflow,
    open_designer,
    press,
    wait_saved,
)

pytestmark = pytest.mark.e2e

FIELDS = [("zeta", "=body.qty * 2"), ("alpha", "first"), ("mid", "=body.name")]


def _added_type(page: Any, before: int) -> str:
    page.wait_for_function(f"() => window.railyardDesigner.model.nodes.length === {before + 1}")
    return str(page.evaluate("() => window.railyardDesigner.model.nodes.at(-1).type"))


def test_quick_add_ranking_and_set_field_order(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    login(page, server)
    workflow_id = new_workflow(page, server, "Field order")
    page.locator('.palette-item[data-type="trigger.webhook"]').click()
    hook = page.evaluate("() => window.railyardDesigner.model.nodes[0].id")
    page.mouse.click(*body_point(page, hook))

    # "http" + Enter: HTTP Request, the leading match
    press(page, "a")
    page.locator(".quick-add").wait_for()
    page.keyboard.type("http")
    first = page.locator(".quick-add li").first.get_attribute("data-type")
    assert first == "http.request", first
    page.keyboard.press("Enter")
    assert _added_type(page, 1) == "http.request"
    press(page, "Control+z")

    # "set" + Enter: the Set itself, an exact match
    page.mouse.click(*body_point(page, hook))
    press(page, "a")
    page.locator(".quick-add").wait_for()
    page.keyboard.type("set")
    page.keyboard.press("Enter")
    assert _added_type(page, 1) == "control.set"
    set_id = page.evaluate("() => window.railyardDesigner.model.nodes.at(-1).id")

    # type three fields in an order that is not the storage's own (length, then bytes)
    form = page.locator(f'#config-panel .config-form[data-node-id="{set_id}"]')
    form.wait_for()
    for i, (key, value) in enumerate(FIELDS):
        form.locator(".kv-add").click()
        row = form.locator(".kv-row").nth(i)
        row.locator(".kv-key").fill(key)
        row.locator(".kv-value").fill(value)
    mapping = next(n for n in diagram(page)["nodes"] if n["id"] == set_id)["config"]["mapping"]
    assert mapping == [{"name": k, "value": v} for k, v in FIELDS]

    # the webhook answers when the run ends, with the Set's output
    page.mouse.click(*body_point(page, hook))
    page.locator('#config-panel [data-field="respond"]').select_option("last_step")
    press(page, "Control+s")
    wait_saved(page)

    open_designer(page, server, workflow_id)
    page.mouse.click(*body_point(page, set_id))
    form.wait_for()
    keys = form.locator(".kv-key").evaluate_all("els => els.map(e => e.value)")
    assert keys == [k for k, _ in FIELDS]
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-set-order.png"))

    page.click("#publish-btn")
    page.locator("#publish-note").wait_for()
    page.click("#publish-confirm")
    page.wait_for_function(
        "() => /Published version/.test(document.getElementById('status').textContent)"
    )
    url = page.locator("#webhook-url code").inner_text().strip()
    resp = httpx.post(url, json={"qty": 3, "name": "Ada"}, timeout=30)
    assert resp.status_code == 200, resp.text
    assert list(resp.json()) == [k for k, _ in FIELDS], resp.text
    assert resp.json() == {"zeta": 6, "alpha": "first", "mid": "Ada"}
