"""The small things of a first visit, at 1440 x 900, each checked as a person sees it.

- The workflow list keeps every action button inside the page and a long name on at most
  two lines.
- The audit page names what a change touched (the workflow's name, not only its id) and
  gives Changes room to read.
- An access page without grants says that project grants also give access.
- A new API token is read-only unless a stronger scope is chosen.
- The shortcut help opens at its top.
- Publishing a draft with errors is refused before any version note is asked for.
- A test run of the draft shows as "test run" in the run list, not "v0".
- On a short window (800 and 600 px) Log out stays in view and the admin links scroll.
Screenshots: ui-workflow-list.png, ui-audit.png, ui-sidebar-800.png, ui-sidebar-600.png.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.api_client import api_client, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import open_designer, press

pytestmark = pytest.mark.e2e

LONG_NAME = "Order intake from the web shop with credit check and warehouse reservation"


def _workflow(server: RailyardServer) -> str:
    """A workflow with a long name that had one test run of its draft, whose draft now
    has an error (an If without its condition)."""
    api = api_client(server)
    wf = api.create_workflow(LONG_NAME).id
    hook = node("hook", "trigger.webhook", 0)
    shape = node("shape", "control.set", 320, mapping=[{"name": "ok", "value": True}])
    for second in (shape, node("check", "control.if", 320)):
        draft = {
            "nodes": [hook, second],
            "edges": [{"id": "e1", "source": "hook", "target": second["id"]}],
            "schema_version": 1,
        }
        api.save_draft(wf, draft)  # stored, with or without problems
        if second is shape:
            run = api.post(f"/api/v1/workflows/{wf}/test-runs", json={"input": {}})
            assert run.status_code == 201, run.text
    return wf


def test_first_visit_details(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    workflow_id = _workflow(server)
    login(page, server)

    # workflow list: actions inside the page, the name on two lines at most
    page.goto(f"{server.base_url}/workflows")
    row = page.locator(f'tr.workflow-row[data-workflow-id="{workflow_id}"]')
    row.wait_for()
    width = page.viewport_size["width"]
    for button in row.locator(".actions-col .btn").all():
        box = button.bounding_box()
        assert box and box["x"] + box["width"] <= width, (button.inner_text(), box)
    title = row.locator("a.row-title")
    lines = title.evaluate(
        "el => Math.round(el.getBoundingClientRect().height"
        " / parseFloat(getComputedStyle(el).lineHeight))"
    )
    assert lines <= 2, lines
    page.screenshot(path=str(ARTIFACTS_DIR / "ui-workflow-list.png"))

    # audit: the workflow by name; Changes readable
    page.goto(f"{server.base_url}/admin/audit?object_id={workflow_id}")
    first = page.locator("tr.audit-row").first
    first.wait_for()
    assert LONG_NAME in first.locator(".audit-object").inner_text()
    changes = page.locator("td.audit-changes").first.bounding_box()
    assert changes and changes["width"] >= 300, changes
    page.screenshot(path=str(ARTIFACTS_DIR / "ui-audit.png"))

    # access: project grants are mentioned
    page.goto(f"{server.base_url}/workflows/{workflow_id}/access")
    assert "grants on its project" in page.locator("main").inner_text()

    # tokens: read by default
    page.goto(f"{server.base_url}/tokens")
    assert page.locator("#token-scope").input_value() == "read"

    # the shortcut help opens at its top
    open_designer(page, server, workflow_id)
    press(page, "?")
    help_dialog = page.locator("dialog.shortcut-help, #shortcut-help").first
    help_dialog.wait_for()
    assert help_dialog.evaluate("d => d.scrollTop") == 0
    page.keyboard.press("Escape")

    # publish with errors: refused before the note
    page.locator("#canvas g.node.has-error").first.wait_for()
    page.click("#publish-btn")
    page.wait_for_function(
        "() => /not published/.test(document.getElementById('status').textContent)"
    )
    assert not page.locator("#publish-note").is_visible()

    # the test run is a "test run" in the list
    page.goto(f"{server.base_url}/runs?workflow_id={workflow_id}")
    version_cell = page.locator("tr.run-row td").nth(2)
    version_cell.wait_for()
    assert version_cell.inner_text().strip() == "test run"


@pytest.mark.parametrize("height", [800, 600])
def test_log_out_stays_in_view_on_a_short_window(
    page: Any, railyard_server: RailyardServer, height: int
) -> None:
    # the admin's sidebar holds every admin link: on a short window the links scroll
    # under the user menu, which keeps Log out in view
    login(page, railyard_server)
    page.set_viewport_size({"width": 1280, "height": height})
    for path in ("/workflows", "/admin/users"):
        page.goto(f"{railyard_server.base_url}{path}")
        button = page.locator("#logout-btn")
        box = button.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height, (path, box)
        last_admin_link = page.locator(".nav-admin .nav-link").last
        last_admin_link.scroll_into_view_if_needed()
        link_box = last_admin_link.bounding_box()
        assert link_box is not None and link_box["y"] + link_box["height"] <= height, link_box
    page.screenshot(path=str(ARTIFACTS_DIR / f"ui-sidebar-{height}.png"))
    button.click()
    page.wait_for_url(f"{railyard_server.base_url}/login**")
