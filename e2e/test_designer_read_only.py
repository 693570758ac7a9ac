"""A viewer and an operator open a workflow's designer: they see the canvas, the settings
and the runs, with no way to change anything.

The admin draws a manual trigger and a Set step and grants a viewer ``read`` and an
operator ``run``. Each of them opens the designer and finds: no palette, no edit buttons,
a "read only: ask <owner> for edit access" line naming the owner; a node dragged stays
where it was, Delete and Ctrl+Z and N do nothing, the settings panel opens with every
field locked, and the status never says "Unsaved changes". The operator keeps Run.
The designer of a workflow they hold no grant on is a "no access" page (403, the reason
and a way back); one of a workflow that does not exist is a 404.
Screenshots: designer-read-only-viewer.png, designer-read-only-operator.png,
designer-no-access.png.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from e2e.api_client import api_client, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import body_point, diagram, drag, press

pytestmark = pytest.mark.e2e

PEOPLE = {
    "viewer": ("viewer.readonly@example.com", "quiet lanterns glow at seven"),
    "operator": ("operator.readonly@example.com", "copper kettles on the hill"),
}
LEVEL = {"viewer": "read", "operator": "run"}


def _setup(server: RailyardServer) -> tuple[str, str]:
    """A workflow with a manual trigger and a Set step, granted to both people, and one
    granted to nobody."""
    api = api_client(server)
    private = api.create_workflow("Nobody else's").id
    wf = api.create_workflow("Read-only designer").id
    start = node("start", "trigger.manual", 0)
    shape = node("shape", "control.set", 320, mapping={"total": "=qty * price"})
    edge = {"id": "e1", "source": "start", "target": "shape"}
    draft = {"nodes": [start, shape], "edges": [edge], "schema_version": 1}
    assert api.save_draft(wf, draft).ok
    for role, (email, password) in PEOPLE.items():
        created = api.post(
            "/api/v1/admin/users", json={"email": email, "password": password, "role": role}
        )
        assert created.status_code == 201, created.text
        user_id = created.json()["user"]["id"]
        grant = api.post(
            f"/api/v1/workflows/{wf}/grants",
            json={"subject": f"user:{user_id}", "level": LEVEL[role]},
        )
        assert grant.status_code == 201, grant.text
    return wf, private


def _check_no_access(page: Any, server: RailyardServer, private_id: str) -> None:
    """A workflow without a grant: 403 saying why, with a way back; an unknown one: 404."""
    answer = page.goto(f"{server.base_url}/workflows/{private_id}/designer")
    assert answer is not None and answer.status == 403
    assert page.locator("h1").inner_text() == "No access"
    reason = page.locator("#error-message").inner_text()
    assert "no access to this workflow" in reason and "owner or an admin" in reason, reason
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-no-access.png"))
    page.get_by_role("link", name="Back to workflows").click()
    page.wait_for_url("**/workflows")
    answer = page.goto(f"{server.base_url}/workflows/{uuid.uuid4()}/designer")
    assert answer is not None and answer.status == 404


def _check_locked(page: Any, server: RailyardServer, workflow_id: str, role: str) -> None:
    page.goto(f"{server.base_url}/workflows/{workflow_id}/designer")
    page.locator('#canvas g.node[data-node-id="shape"]').wait_for()
    before = diagram(page)

    line = page.locator("#read-only-badge")
    assert line.is_visible()
    assert f"ask {server.email} for edit access" in line.inner_text()
    for absent in ("#palette", "#undo-btn", "#redo-btn", "#layout-btn", "#note-btn", "#save-btn"):
        assert page.locator(absent).count() == 0, absent
    assert page.locator("#run-btn").count() == (1 if role == "operator" else 0)

    # a drag moves nothing; the keys that edit do nothing
    x, y = body_point(page, "shape")
    drag(page, (x, y), (x + 160, y + 120))
    for keys in ("Delete", "Control+z", "n", "l", "Control+d"):
        press(page, keys)
    assert diagram(page) == before

    # the settings open, locked
    page.locator('#config-panel .config-form[data-node-id="shape"]').wait_for()
    assert page.locator("#config-panel .read-only-note").is_visible()
    controls = page.locator("#config-panel .config-form [data-field]")
    assert controls.count() > 0
    for i in range(controls.count()):
        c = controls.nth(i)
        locked = c.evaluate("c => c.disabled || c.readOnly || c.tagName === 'DIV'")
        assert locked, c.evaluate("c => c.outerHTML.slice(0, 200)")
    edits = "#config-panel :is(.kv-add, .kv-remove, .fx-toggle, .cond-add, .cond-remove)"
    assert page.locator(edits).count() > 0  # drawn in the form, ...
    assert not any(b.is_visible() for b in page.locator(edits).all())  # ... never shown
    label = page.locator('#config-panel [data-field="__label"]')
    label.press("End")
    page.keyboard.type("changed")
    assert diagram(page) == before
    assert "Unsaved" not in page.locator("#status").inner_text()
    page.screenshot(path=str(ARTIFACTS_DIR / f"designer-read-only-{role}.png"))


def test_viewer_and_operator_get_a_read_only_designer(
    browser: Any, railyard_server: RailyardServer
) -> None:
    workflow_id, private_id = _setup(railyard_server)
    for role, (email, password) in PEOPLE.items():
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.set_default_timeout(15_000)
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            login(page, railyard_server, email, password)
            _check_locked(page, railyard_server, workflow_id, role)
            if role == "viewer":
                _check_no_access(page, railyard_server, private_id)
            assert not errors, errors
        finally:
            context.close()
