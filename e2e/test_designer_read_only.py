"""A viewer and an operator open a workflow's designer: they see the canvas, the settings
and the runs, with no way to change anything.

The admin draws a manual trigger and a Set step and grants a viewer ``read`` and an
operator ``run``. Each of them opens the designer and finds: no palette, no edit buttons,
a "read only: ask <owner> for edit access" line naming the owner; a node dragged stays
where it was, Delete and Ctrl+Z and N do nothing, the settings panel opens with every
field locked, and the status never says "Unsaved changes". The operator keeps Run.
Screenshots: designer-read-only-viewer.png, designer-read-only-operator.png.
"""

from __future__ import annotations

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


def _setup(server: RailyardServer) -> str:
    """A workflow with a manual trigger and a Set step, granted to both people."""
    api = api_client(server)
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
    return wf


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
    workflow_id = _setup(railyard_server)
    for role, (email, password) in PEOPLE.items():
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.set_default_timeout(15_000)
        try:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            login(page, railyard_server, email, password)
            _check_locked(page, railyard_server, workflow_id, role)
            assert not errors, errors
        finally:
            context.close()
