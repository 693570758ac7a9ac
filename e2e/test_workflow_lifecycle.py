"""Workflow pickers in the designer, and rename / duplicate / delete (archive) / restore on
the workflow list, with the mouse and the keyboard.

A Sub-workflow step's "Workflow" field is a searchable list of the workflows the user may
run: typed "onb" + ArrowDown + Enter picks "Onboarding"; cleared and typed "bill", a click
picks "Billing". When "Billing" is later deleted, the Problems list says the step calls an
archived workflow. On the list page, "Rename" (keyboard) changes name and description,
"Duplicate" (mouse) opens the copy in the designer, "Delete" (keyboard, confirmed) archives
it with an Undo, and the Archived tab restores it. Screenshots: workflow-picker.png,
workflows-archived.png.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import new_workflow

pytestmark = pytest.mark.e2e

CREATE = """async (name) => {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const r = await fetch('/api/workflows', {method: 'POST', credentials: 'same-origin',
    headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrf},
    body: JSON.stringify({name})});
  return (await r.json()).id;
}"""

DELETE = """async (id) => {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const r = await fetch(`/api/workflows/${id}`, {method: 'DELETE', credentials: 'same-origin',
    headers: {'X-CSRFToken': csrf}});
  return r.status;
}"""

BUILD = """() => {
  const { model, canvas } = window.railyardDesigner;
  const start = model.addNode("trigger.manual", 80, 120);
  const call = model.addNode("control.subworkflow", 420, 120);
  model.connect(start.id, "out", call.id, "in");
  canvas.fit();
  return call.id;
}"""

CONFIG = "id => window.railyardDesigner.model.node(id).config"


def test_workflow_picker_with_keyboard_and_mouse(
    page: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    login(page, server)
    new_workflow(page, server, "Caller")
    onboarding = page.evaluate(CREATE, "Onboarding")
    billing = page.evaluate(CREATE, "Billing")
    call = page.evaluate(BUILD)
    page.evaluate("id => window.railyardDesigner.canvas.select({kind: 'node', id})", call)
    form = page.locator(f'#config-panel form.config-form[data-node-id="{call}"]')
    form.wait_for()
    search = form.locator(".workflow-search")
    options = form.locator(".workflow-options")

    # keyboard: type, arrow, Enter
    search.click()
    page.keyboard.type("onb")
    expect(options.locator("[role=option]")).to_have_count(1)  # the search has answered
    options.locator('[data-name="Onboarding"]').wait_for()
    assert "Caller" not in options.inner_text()  # a workflow does not call itself
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    assert options.is_hidden()
    assert page.evaluate(CONFIG, call)["workflow_id"] == onboarding
    assert search.input_value() == "Onboarding"
    assert form.locator(".workflow-open").get_attribute("href") == (
        f"/workflows/{onboarding}/designer"
    )

    # mouse: clear, search, click
    form.locator(".workflow-clear").click()
    assert "workflow_id" not in page.evaluate(CONFIG, call)
    page.keyboard.type("bill")
    expect(options).to_be_visible()
    expect(options.locator("[role=option]")).to_have_count(1)
    options.locator('[data-name="Billing"]').wait_for()
    page.screenshot(path=str(ARTIFACTS_DIR / "workflow-picker.png"))
    options.locator('[data-name="Billing"]').click()
    assert page.evaluate(CONFIG, call)["workflow_id"] == billing

    # Escape closes the list and keeps the choice
    search.click()
    options.locator("[role=option]").first.wait_for()
    page.keyboard.press("Escape")
    assert options.is_hidden() and search.input_value() == "Billing"

    # the reopened panel shows the name, not the id
    page.evaluate("() => window.railyardDesigner.canvas.select(null)")
    page.evaluate("id => window.railyardDesigner.canvas.select({kind: 'node', id})", call)
    form.wait_for()
    assert form.locator(".workflow-search").input_value() == "Billing"

    # deleting the called workflow shows up as a problem of the step
    assert page.evaluate(DELETE, billing) == 204
    page.evaluate(
        "id => window.railyardDesigner.model.updateNode(id, {label: 'Call billing'})", call
    )
    problem = page.locator("#diagnostics-list li.diagnostic", has_text="is archived")
    problem.wait_for()
    assert "Billing" in problem.inner_text()


def test_rename_duplicate_delete_and_restore_on_the_list(
    page: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    login(page, server)
    wid = new_workflow(page, server, "Quarterly report")
    page.goto(f"{server.base_url}/workflows")
    row = page.locator(f'tr.workflow-row[data-workflow-id="{wid}"]')

    # rename with the keyboard: focus "Rename", Enter opens it, fields, Enter submits
    row.locator(".workflow-edit summary").focus()
    page.keyboard.press("Enter")
    name = row.locator('input[name="name"]')
    name.focus()
    page.keyboard.press("Control+a")
    page.keyboard.type("Quarterly numbers")
    page.keyboard.press("Tab")
    page.keyboard.type("Sends the numbers")
    page.keyboard.press("Tab")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert row.locator(".row-title").inner_text() == "Quarterly numbers"
    assert row.locator(".workflow-description").inner_text() == "Sends the numbers"

    # duplicate with the mouse: the copy opens in the designer
    row.get_by_role("button", name="Duplicate Quarterly numbers").click()
    page.wait_for_url(re.compile(r".*/workflows/[0-9a-f-]+/designer$"))
    assert page.locator("#workflow-name").inner_text() == "Quarterly numbers (copy)"
    copy_id = re.search(r"/workflows/([0-9a-f-]+)/designer", page.url).group(1)  # type: ignore[union-attr]
    assert copy_id != wid

    # delete the copy with the keyboard (confirmed), then undo
    page.goto(f"{server.base_url}/workflows")
    copy_row = page.locator(f'tr.workflow-row[data-workflow-id="{copy_id}"]')
    questions: list[str] = []

    def accept(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    copy_row.get_by_role("button", name="Delete Quarterly numbers (copy)").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/workflows\?notice=archived.*"))
    assert "can be restored" in questions[0]
    notice = page.locator("#archived-notice")
    assert "Archived “Quarterly numbers (copy)”" in notice.inner_text()
    assert page.locator(f'tr.workflow-row[data-workflow-id="{copy_id}"]').count() == 0
    with page.expect_navigation():
        notice.get_by_role("button", name="Undo").click()
    assert page.locator(f'tr.workflow-row[data-workflow-id="{copy_id}"]').count() == 1

    # delete again (mouse), find it under Archived, restore it there (keyboard)
    page.locator(f'tr.workflow-row[data-workflow-id="{copy_id}"]').get_by_role(
        "button", name="Delete Quarterly numbers (copy)"
    ).click()
    page.wait_for_url(re.compile(r".*/workflows\?notice=archived.*"))
    page.locator("#archived-tab").click()
    archived_row = page.locator(f'tr.workflow-row[data-workflow-id="{copy_id}"]')
    archived_row.wait_for()
    page.screenshot(path=str(ARTIFACTS_DIR / "workflows-archived.png"), full_page=True)
    archived_row.get_by_role("button", name="Restore Quarterly numbers (copy)").focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator(f'tr.workflow-row[data-workflow-id="{copy_id}"]').count() == 1
