"""A first-time user builds the Order intake workflow with the mouse: the palette, quick-add
from ports, the field picker and the condition builder, without typing one expression.

Webhook (answers with a Respond step; its body schema inferred from a sample order) ->
Set (customer and total picked from the body) -> If (built in the condition builder:
total > 100) -> true: HTTP Request to the warehouse, then Respond; false: Respond. After
every added node no two node rectangles overlap. Published, a big order reaches the
warehouse and both callers get an answer. Screenshots: first-time-user-*.png.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, RecordingEndpoint, login
from e2e.designer_page import (
    body_point,
    new_workflow,
    overlapping_nodes,
    port_center,
    press,
    publish,
    wait_saved,
    wait_set_field,
)

pytestmark = pytest.mark.e2e

SAMPLE = '{"customer": "Ada", "total": 120}'


def _no_overlap(page: Any, step: str) -> None:
    assert not overlapping_nodes(page), f"after {step}: {overlapping_nodes(page)}"


def _quick_add_from(page: Any, node: str, port: str, query: str) -> str:
    """Click ``node``'s output ``port``, pick ``query``'s first match; the new node's id."""
    before = page.evaluate("() => window.railyardDesigner.model.nodes.length")
    page.mouse.click(*port_center(page, node, "out", port))
    page.locator(".quick-add").wait_for()
    page.keyboard.type(query)
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => window.railyardDesigner.model.nodes.length === {before + 1}")
    _no_overlap(page, f"quick-add {query} after {node}.{port}")
    new_id = str(page.evaluate("() => window.railyardDesigner.model.nodes.at(-1).id"))
    press(page, "0")  # fit: the next port in view
    return new_id


def _form(page: Any, node: str) -> Any:
    form = page.locator(f'#config-panel .config-form[data-node-id="{node}"]')
    if not form.is_visible():
        page.mouse.click(*body_point(page, node))
    form.wait_for()
    return form


def _pick(form: Any, key: str, path: str) -> None:
    """A Set row named ``key`` whose value is picked from the field list."""
    form.locator(".kv-add").click()
    row = form.locator(".kv-row").last
    row.locator(".kv-key").fill(key)
    row.locator(".kv-value").click()
    form.locator(".expr-assist .expr-pick-btn").click()
    form.locator(f'.field-picker-item[data-path="{path}"]').first.click()


def test_order_intake_built_without_typing_an_expression(
    page: Any, railyard_server: RailyardServer, http_endpoint: RecordingEndpoint
) -> None:
    server = railyard_server
    login(page, server)
    new_workflow(page, server, "Order intake")

    page.locator('.palette-item[data-type="trigger.webhook"]').click()
    page.locator("#canvas g.node").first.wait_for()
    hook = str(page.evaluate("() => window.railyardDesigner.model.nodes[0].id"))
    form = _form(page, hook)
    form.locator('[data-field="respond"]').select_option("respond_node")
    infer = form.locator('.body-schema-infer[data-source="sample"]')
    infer.click()
    form.locator(".body-schema-sample").fill(SAMPLE)  # a sample order, not an expression
    infer.click()
    form.locator(".body-schema-status").filter(has_text="inferred from the sample").wait_for()

    shape = _quick_add_from(page, hook, "out", "set")
    form = _form(page, shape)
    _pick(form, "customer", "body.customer")
    _pick(form, "total", "body.total")
    wait_set_field(page, shape, "total", "=body.total")

    check = _quick_add_from(page, shape, "out", "if")
    form = _form(page, check)
    builder = form.locator(".cond-builder")
    builder.wait_for()
    field = builder.locator(".cond-field").first
    page.wait_for_function(
        "() => [...document.querySelectorAll('.cond-builder datalist option')]"
        ".some((o) => o.value === 'total')"
    )
    field.fill("total")  # chosen from the list of the step's input fields
    field.press("Tab")
    builder.locator(".cond-op").first.select_option("gt")
    builder.locator(".cond-value").first.fill("100")
    page.wait_for_function(
        "id => window.railyardDesigner.model.node(id).config.condition === 'total > 100'",
        arg=check,
    )
    page.screenshot(path=str(ARTIFACTS_DIR / "first-time-user-builder.png"))

    warehouse = _quick_add_from(page, check, "true", "http request")
    form = _form(page, warehouse)
    form.locator('[data-field="method"]').select_option("POST")
    form.locator('[data-field="url"]').fill(http_endpoint.url)
    _quick_add_from(page, warehouse, "out", "respond")
    _quick_add_from(page, check, "false", "respond")
    _no_overlap(page, "the whole workflow")
    page.screenshot(path=str(ARTIFACTS_DIR / "first-time-user-workflow.png"))

    press(page, "Control+s")
    wait_saved(page)
    publish(page, "First version")
    page.wait_for_function(
        "() => /Published version 1/.test(document.getElementById('status').textContent)"
    )
    url = page.locator("#webhook-url code").inner_text().strip()
    big = httpx.post(url, json={"customer": "Ada", "total": 250}, timeout=30)
    assert big.status_code == 200, big.text
    http_endpoint.wait_for_requests(1)
    small = httpx.post(url, json={"customer": "Bo", "total": 20}, timeout=30)
    assert small.status_code == 200, small.text
    assert small.json() == {"customer": "Bo", "total": 20}
    assert len(http_endpoint.requests) == 1, "only the big order reaches the warehouse"
