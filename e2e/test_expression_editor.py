"""The expression editor in Chromium: body schema inferred from a sample, a misspelt field
flagged on the field as you type, the picker and autocomplete inserting paths that then
evaluate in a real run, and the live preview switching to that run's data."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import (
    SET_FIELD,
    new_workflow,
    open_designer,
    open_node,
    publish,
    save_draft,
    wait_for_run,
    wait_set_field,
)

pytestmark = pytest.mark.e2e

SAMPLE = '{"customer": {"name": "Ada", "email": "ada@example.com"}, "qty": 2}'

DIAGRAM = {
    "nodes": [
        {
            "id": "hook",
            "type": "trigger.webhook",
            "label": "Order",
            "position": {"x": 60, "y": 120},
        },
        {
            "id": "set_1",
            "type": "control.set",
            "label": "Greeting",
            "position": {"x": 360, "y": 120},
            "config": {"mapping": {}},
        },
    ],
    "edges": [{"id": "e1", "source": "hook", "target": "set_1"}],
}


def add_row(form: Any, key: str) -> Any:
    """Add a Fields row named ``key`` and focus its value; returns the value input."""
    form.locator(".kv-add").click()
    row = form.locator(".kv-row").last
    row.locator(".kv-key").fill(key)
    value = row.locator(".kv-value")
    value.click()
    return value


def mapping_value(page: Any, key: str) -> Any:
    return page.evaluate(SET_FIELD, ["set_1", key])


def test_expression_picker_diagnostic_and_run(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    login(page, server)
    workflow_id = new_workflow(page, server, "Greet customers")
    save_draft(page, server, workflow_id, DIAGRAM)

    # ----------------------------------------------- body schema from a pasted sample
    form = open_node(page, "hook")
    infer = form.locator('.body-schema-infer[data-source="sample"]')
    infer.click()
    form.locator(".body-schema-sample").fill(SAMPLE)
    infer.click()
    form.locator(".body-schema-status").filter(has_text="inferred from the sample").wait_for()
    schema = page.evaluate("() => window.railyardDesigner.model.node('hook').config.body_schema")
    assert schema["properties"]["customer"]["properties"]["name"] == {"type": "string"}

    # ----------------------------------------------- the picker inserts a path
    form = open_node(page, "set_1")
    value = add_row(form, "greeting")
    value.press_sequentially('="Hello " & ')
    assist = form.locator(".expr-assist")
    assist.locator(".expr-pick-btn").click()
    picker = assist.locator(".field-picker")
    picker.locator(".field-picker-search").fill("customer.na")
    item = picker.locator('.field-picker-item[data-path="body.customer.name"]')
    item.wait_for()
    assert "string" in item.inner_text()
    item.click()
    assert value.input_value() == '="Hello " & body.customer.name'
    wait_set_field(page, "set_1", "greeting", '="Hello " & body.customer.name')
    # No run yet: the preview evaluates on empty data and says nothing matched the path.
    assist.locator(".expr-preview-value").filter(has_text='"Hello "').wait_for()

    # ----------------------------------------------- a misspelt field, flagged on the field
    total = add_row(form, "total")
    total.press_sequentially("=body.qty * body.prise")
    message = "body has no field prise; known: customer, qty"
    form.locator('[data-field-wrap="mapping"] .field-error').filter(has_text=message).wait_for()
    form.locator(".expr-problem.severity-error").filter(has_text=message).wait_for()
    page.locator("#diagnostics li.diagnostic").filter(has_text=message).wait_for()
    page.locator('#canvas g.node.has-error[data-node-id="set_1"]').wait_for()

    # ----------------------------------------------- autocomplete replaces it
    total.fill("")
    total.press_sequentially("=body.q")
    suggestion = form.locator('.expr-suggest-item[data-path="body.qty"]')
    suggestion.wait_for()
    total.press("Enter")
    total.press_sequentially(" * 10")
    assert total.input_value() == "=body.qty * 10"
    wait_set_field(page, "set_1", "total", "=body.qty * 10")
    page.wait_for_function("() => !document.querySelector('#diagnostics li.diagnostic')")
    assert form.locator(".field-error").count() == 0

    # ----------------------------------------------- syntax error as you type
    total.press_sequentially(" +")
    form.locator(".expr-error").filter(has_text="syntax error").wait_for()
    total.press("Backspace")
    total.press("Backspace")
    page.wait_for_function(
        "() => { const e = document.querySelector('.expr-error'); return e && e.hidden; }"
    )

    # ----------------------------------------------- publish and run for real
    publish(page)
    page.wait_for_function(
        "() => /Published version 1/.test(document.querySelector('#status').textContent)"
    )
    info = page.evaluate(f"() => fetch('/api/workflows/{workflow_id}').then(r => r.json())")
    hook_url = info["webhook_url"]
    reply = httpx.post(hook_url, content=SAMPLE, headers={"content-type": "application/json"})
    assert reply.status_code == 202, reply.text
    run_id = reply.json()["run_id"]
    run = wait_for_run(page, run_id)
    assert run["status"] == "succeeded", run
    [step] = [s for s in run["steps"] if s["step_id"] == "set_1"]
    assert step["output"] == {"greeting": "Hello Ada", "total": 20}

    # ----------------------------------------------- the preview now shows the run's data
    open_designer(page, server, workflow_id)
    form = open_node(page, "set_1")
    greeting = form.locator(".kv-row").filter(has=page.locator('.kv-key[value="greeting"]'))
    greeting.locator(".kv-value").click()
    preview = form.locator(".expr-assist .expr-preview-value")
    preview.filter(has_text='"Hello Ada"').wait_for()
    assert run_id in (preview.get_attribute("title") or "")
    form.locator(".expr-pick-btn").click()
    example = form.locator('.field-picker-item[data-path="body.customer.name"]').first
    example.filter(has_text='"Ada"').wait_for()
    page.screenshot(path=str(ARTIFACTS_DIR / "expression-editor.png"), full_page=False)
    assert mapping_value(page, "greeting") == '="Hello " & body.customer.name'
