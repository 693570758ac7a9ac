"""The step data view: a node opened after a test run shows its input, its settings and its
output side by side; each side switches between table, JSON and schema; the output side
pins data (the pins routes) and says where its data comes from, with a selector once
there are several sources; a field dragged from the input side onto a setting maps it, and
so does Enter on a field after focusing the setting. Before any run, the input side of a
step whose step before has no data lists the fields that step sends, and how to get data.
Screenshots: step-data-view.png, step-data-view-before-run.png."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.api_client import api_client, chain_draft, node
from e2e.axe_check import axe_violations, describe
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import body_point, drag_field, open_settings

pytestmark = pytest.mark.e2e

ORDER = {
    "customer": {"name": "Ada", "email": "ada@example.com"},
    "items": [{"sku": "A1", "qty": 2}, {"sku": "B2", "qty": 1}],
}
MAPPING = "() => window.railyardDesigner.model.node('total').config.mapping"


def test_step_data_view_after_a_test_run(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    api = api_client(server)
    start = node("start", "trigger.manual", 0)
    total = node(
        "total",
        "control.set",
        320,
        mapping=[
            {"name": "count", "value": "=$count(items)"},
            {"name": "email", "value": "unknown"},
        ],
    )
    after = node("after", "control.set", 640, mapping=[{"name": "n", "value": "=count"}])
    workflow_id = chain_draft(api, "Step data", start, total, after)
    pinned = api.put(f"/api/v1/workflows/{workflow_id}/pins/start", json={"data": ORDER})
    assert pinned.status_code == 200, pinned.text
    login(page, server)
    open_settings(page, server, workflow_id, "total")

    # before any run, a step after one without pinned data shows what is known: the
    # fields the step before sends (draggable), and how to get real data
    page.mouse.dblclick(*body_point(page, "after"))
    known = page.locator("#data-input .data-body > .data-schema")
    known.wait_for()
    assert "no data yet" in page.locator("#data-input-source").inner_text()
    assert known.locator('[data-drag-path="count"]').count() == 1
    assert known.locator('[data-drag-path="email"]').count() == 1
    assert "pin data on “total”" in page.locator("#data-input-hint").inner_text()
    # the mapping hint names the settings' button as it is labelled ("Fields")
    hint = page.locator("#data-input p.hint", has_text="Drag a field").inner_text()
    assert "Fields button" in hint and "{}" not in hint, hint
    page.screenshot(path=str(ARTIFACTS_DIR / "step-data-view-before-run.png"))
    page.locator("#data-view-btn").click()
    page.locator("#data-input").wait_for(state="hidden")

    # a test run of the draft (the trigger's pin is its input)
    page.click("#test-btn")
    page.locator('#run-overlay[data-status="succeeded"]').wait_for()

    # opened with a double click on the node: input | settings | output
    page.mouse.dblclick(*body_point(page, "total"))
    data_in, data_out = page.locator("#data-input"), page.locator("#data-output")
    data_in.locator(".data-table").wait_for()
    assert page.locator("#data-view-btn").get_attribute("aria-expanded") == "true"
    boxes = [
        page.locator(sel).bounding_box() for sel in ("#data-input", "#config-panel", "#data-output")
    ]
    assert all(boxes), boxes
    assert boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"] + 1  # type: ignore[index]
    assert boxes[1]["x"] + boxes[1]["width"] <= boxes[2]["x"] + 1  # type: ignore[index]
    assert "Test run on the canvas" in (page.locator("#data-input-source").inner_text())
    assert data_in.locator('th[data-drag-path="customer"]').count() == 1
    assert "ada@example.com" in data_in.locator(".data-table").inner_text()

    # each side switches between table, JSON and schema (buttons, keyboard-operable)
    data_in.locator('.data-views [data-view="json"]').click()
    assert '"sku": "A1"' in data_in.locator("pre.data-json").inner_text()
    data_in.locator('.data-views [data-view="schema"]').focus()
    page.keyboard.press("Enter")
    data_in.locator('.data-schema [data-drag-path="customer.email"]').wait_for()
    assert "list of object" in data_in.locator(".data-body > .data-schema").inner_text()
    data_out.locator('.data-views [data-view="json"]').click()
    assert '"count": 2' in data_out.locator("pre.data-json").inner_text()
    data_out.locator('.data-views [data-view="schema"]').click()
    assert "count" in data_out.locator(".data-body > .data-schema").inner_text()
    data_out.locator('.data-views [data-view="table"]').click()
    assert data_out.locator(".data-table").count() == 1
    assert data_out.locator('[aria-pressed="true"]').inner_text() == "Table"

    # pin the output there, edited: it becomes a source beside the test run
    data_out.locator("#data-pin-edit").click()
    editor = data_out.locator("#data-pin-editor")
    assert '"count": 2' in editor.input_value()
    editor.fill('{"count": 99, "email": "pinned@example.com"}')
    data_out.locator("#data-pin-save").click()
    page.wait_for_function("() => window.railyardDesigner.testRuns.pins.total?.data?.count === 99")
    source = data_out.locator("select#data-output-source")
    source.wait_for()
    assert source.input_value() == "pin"
    assert "pinned@example.com" in data_out.locator(".data-table").inner_text()
    stored = api.get(f"/api/v1/workflows/{workflow_id}/pins").json()
    assert stored["total"]["data"] == {"count": 99, "email": "pinned@example.com"}
    source.select_option("shown")
    shown = data_out.locator('.data-body[data-source-key="shown"] .data-table')
    assert "pinned@example.com" not in shown.inner_text()
    assert "count" in shown.inner_text()

    # a field dragged from the input side onto a setting maps it
    email_value = page.locator('#config-panel [data-field-wrap="mapping"] .kv-row .kv-value').nth(1)
    drag_field(page, data_in.locator('.data-schema [data-drag-path="customer.email"]'), email_value)
    page.wait_for_function(
        f"() => ({MAPPING})().some((m) => m.name === 'email' && m.value === '=customer.email')"
    )
    # ... and from the keyboard: focus a setting, then Enter on a field of the input side
    count_value = page.locator('#config-panel [data-field-wrap="mapping"] .kv-row .kv-value').nth(0)
    count_value.fill("")
    field = data_in.locator('.data-schema [data-drag-path="customer.name"]')
    field.focus()
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"() => ({MAPPING})().some((m) => m.name === 'count' && m.value === '=customer.name')"
    )
    assert page.evaluate("() => document.activeElement.classList.contains('kv-value')")
    assert data_in.locator(".field-map-status").inner_text() == "Mapped customer.name"
    # a setting the focus only passes through (Shift+Tab on the way to the field) is no
    # target: the mapping goes into the setting last typed in
    count_value.fill("")  # typed in: the target
    key_box = page.locator('#config-panel [data-field-wrap="mapping"] .kv-row .kv-key').nth(0)
    key_box.focus()  # passed through
    data_in.locator('.data-schema [data-drag-path="customer.email"]').focus()
    page.keyboard.press("Enter")
    page.wait_for_function(
        f"() => ({MAPPING})().some((m) => m.name === 'count' && m.value === '=customer.email')"
    )
    assert key_box.input_value() == "count"
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS_DIR / "step-data-view.png"))
    violations = axe_violations(page, within=".side-panels")
    assert not violations, describe(violations)

    # Escape closes it: back to the canvas with the settings at the side
    page.locator("#data-view-btn").focus()
    page.keyboard.press("Escape")
    page.locator("#data-input").wait_for(state="hidden")
    assert page.locator("#data-view-btn").get_attribute("aria-expanded") == "false"
    assert page.evaluate("() => document.activeElement.id") == "data-view-btn"
    page.keyboard.press("Enter")  # and opens again from the keyboard
    page.locator("#data-input .data-body").wait_for()
