"""Restrict users to one workflow, end to end in the browser, as people do it.

The admin creates an editor and a viewer on the Users page and two workflows A and B,
then grants the editor ``edit`` and the viewer ``read`` on A from A's Access page. The
editor (own browser) sees A but not B (B's page says "No access", 403), draws a manual
trigger and a Set step in A's designer, publishes and runs it. The viewer (own browser)
reads A's runs and the run page, finds no Save/Publish/Run buttons in the designer, and
the JSON API refuses the viewer's publish and run requests with 403. The admin finds each
step on the audit page. Screenshots: access-editor-list.png, access-viewer-designer.png,
access-audit.png.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import connect, drag_node, wait_saved
from e2e.designer_page import publish as publish_draft

pytestmark = pytest.mark.e2e

EDITOR = "editor.access@example.com"
EDITOR_PASSWORD = "copper kettle on the hill"
VIEWER = "viewer.access@example.com"
VIEWER_PASSWORD = "seven quiet lanterns glow"

# The viewer's own page posts to the JSON API with its CSRF header, as the designer does.
POST_JSON = """async ([url, body]) => {
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const resp = await fetch(url, {
    method: "POST",
    headers: {"Content-Type": "application/json", "X-CSRFToken": token},
    body: JSON.stringify(body),
  });
  return {status: resp.status, text: await resp.text()};
}"""


@contextmanager
def signed_in(browser: Any, server: RailyardServer, email: str, password: str) -> Iterator[Any]:
    """A page in a browser context of its own, signed in as ``email``; fails the test on
    any Content-Security-Policy violation that page reports."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15_000)
    lines: list[str] = []
    try:
        page = context.new_page()
        page.on("console", lambda m: lines.append(f"console.{m.type}: {m.text}"))
        page.on("pageerror", lambda e: lines.append(f"pageerror: {e}"))
        login(page, server, email, password)
        yield page
    finally:
        context.close()
    violations = [line for line in lines if "Content Security Policy" in line]
    assert not violations, "Content-Security-Policy violations:\n" + "\n".join(violations)


def create_user(page: Any, email: str, name: str, role: str, password: str) -> str:
    """Fill the Users page's form with a password; returns the new user's id."""
    form = page.locator("#new-user-form")
    form.locator('input[name="email"]').fill(email)
    form.locator('input[name="display_name"]').fill(name)
    form.locator('select[name="role"]').select_option(role)
    form.locator('input[name="password"]').fill(password)
    form.locator('button[type="submit"]').click()
    row = page.locator(f'tr[data-email="{email}"]')
    row.wait_for()
    assert page.locator("#admin-error").count() == 0
    assert row.locator("select.role-select").input_value() == role
    assert "password" in row.inner_text()
    return (row.get_attribute("id") or "").removeprefix("user-")


def create_workflow(page: Any, base: str, name: str) -> str:
    page.goto(f"{base}/workflows")
    page.fill("#new-workflow-name", name)
    page.click("#create-workflow")
    page.wait_for_url(re.compile(r".*/workflows/[0-9a-f-]+/designer$"))
    match = re.search(r"/workflows/([0-9a-f-]+)/designer", page.url)
    assert match
    return match.group(1)


def grant(page: Any, base: str, workflow_id: str, email: str, level: str) -> None:
    """From A's designer, the Access button, then the grant form."""
    page.goto(f"{base}/workflows/{workflow_id}/designer")
    with page.expect_navigation():
        page.click("#access-link")
    page.select_option(".grant-form select[name=subject]", label=email)
    page.select_option(".grant-form select[name=level]", level)
    with page.expect_navigation():
        page.click(".grant-form button[type=submit]")
    row = page.locator(".grants-table tr", has_text=email)
    assert (row.locator(".badge").text_content() or "").strip() == level


def status_contains(page: Any, text: str) -> None:
    page.locator("#status", has_text=text).wait_for()


def test_admin_restricts_editor_and_viewer_to_one_workflow(
    page: Any, browser: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    base = server.base_url
    ARTIFACTS_DIR.mkdir(exist_ok=True)

    # ------------------------------------------------ 1. the admin creates users and workflows
    login(page, server)
    page.click('nav a[href="/admin/users"]')
    page.wait_for_url(f"{base}/admin/users")
    editor_id = create_user(page, EDITOR, "Eddie Editor", "editor", EDITOR_PASSWORD)
    viewer_id = create_user(page, VIEWER, "Vera Viewer", "viewer", VIEWER_PASSWORD)
    wf_a = create_workflow(page, base, "Access A")
    wf_b = create_workflow(page, base, "Access B")

    # ------------------------------------------------ 2. grants on A
    grant(page, base, wf_a, EDITOR, "edit")
    grant(page, base, wf_a, VIEWER, "read")

    # ------------------------------------------------ 3. the editor edits, publishes, runs A
    with signed_in(browser, server, EDITOR, EDITOR_PASSWORD) as editor:
        rows = editor.locator("#workflows-table tr.workflow-row")
        assert editor.locator(f'tr.workflow-row[data-workflow-id="{wf_a}"]').is_visible()
        assert rows.count() == 1, rows.all_inner_texts()
        assert "Access B" not in editor.locator("main").inner_text()
        editor.screenshot(path=str(ARTIFACTS_DIR / "access-editor-list.png"), full_page=True)
        response = editor.goto(f"{base}/workflows/{wf_b}/designer")
        assert response is not None and response.status == 403  # no grant: "No access"

        editor.goto(f"{base}/workflows")
        editor.locator(f'tr.workflow-row[data-workflow-id="{wf_a}"] a.row-title').click()
        editor.wait_for_url(f"{base}/workflows/{wf_a}/designer")
        editor.locator(".palette-item").first.wait_for()
        assert editor.locator("#access-link").count() == 0  # edit, not manage
        editor.locator('.palette-item[data-type="trigger.manual"]').click()
        trigger = editor.locator('#canvas g.node[data-type="trigger.manual"]')
        trigger.wait_for()
        trigger_id = trigger.get_attribute("data-node-id")
        assert trigger_id
        drag_node(editor, trigger_id, -320, 0)
        editor.locator('.palette-item[data-type="control.set"]').click()
        set_node = editor.locator('#canvas g.node[data-type="control.set"]')
        set_node.wait_for()
        set_id = set_node.get_attribute("data-node-id")
        assert set_id
        connect(editor, trigger_id, "out", set_id)
        # attached: a straight horizontal edge has a zero-height box ("hidden" to Playwright)
        editor.locator("#canvas path.edge").wait_for(state="attached")
        set_node.locator("rect.node-body").click(position={"x": 110, "y": 5})
        form = editor.locator(f'#config-panel form.config-form[data-node-id="{set_id}"]')
        form.locator(".kv-add").click()
        form.locator(".kv-row").last.locator(".kv-key").fill("greeting")
        form.locator(".kv-row").last.locator(".kv-value").fill("hello from the editor")

        editor.click("#save-btn")
        wait_saved(editor)
        status_contains(editor, "Saved")
        publish_draft(editor)
        status_contains(editor, "Published version 1")
        assert editor.locator("#version-badge").inner_text() == "v1"

        editor.click("#run-btn")
        editor.locator("#run-dialog").wait_for()
        editor.click("#run-submit")
        run_link = editor.locator("#run-link")
        run_link.wait_for()
        run_id = (run_link.get_attribute("href") or "").rsplit("/", 1)[-1]
        assert re.fullmatch(r"[0-9a-f-]{36}", run_id), run_id
        run_link.click()
        editor.wait_for_url(f"{base}/runs/{run_id}")
        editor.locator('#run-view[data-status="succeeded"]').wait_for(timeout=30_000)

    # ------------------------------------------------ 4. the viewer reads but may not change A
    with signed_in(browser, server, VIEWER, VIEWER_PASSWORD) as viewer:
        assert viewer.locator("tr.workflow-row").count() == 1
        viewer.locator(f'tr.workflow-row[data-workflow-id="{wf_a}"] a', has_text="Runs").click()
        viewer.wait_for_url(re.compile(rf".*/runs\?workflow_id={wf_a}"))
        run_row = viewer.locator(f'tr.run-row[data-run-id="{run_id}"]')
        run_row.wait_for()
        run_row.locator("a.row-title").click()
        viewer.wait_for_url(f"{base}/runs/{run_id}")
        viewer.locator('#run-view[data-status="succeeded"]').wait_for()
        assert viewer.locator(f'section.step[data-step-id="{set_id}"]').is_visible()

        viewer.goto(f"{base}/workflows/{wf_a}/designer")
        viewer.locator(f'#canvas g.node[data-node-id="{set_id}"]').wait_for()
        assert viewer.locator("#read-only-badge").is_visible()
        for button in ("#save-btn", "#publish-btn", "#run-btn", "#access-link"):
            assert viewer.locator(button).count() == 0, button
        viewer.screenshot(path=str(ARTIFACTS_DIR / "access-viewer-designer.png"))

        publish = viewer.evaluate(POST_JSON, [f"/api/workflows/{wf_a}/publish", {}])
        assert publish["status"] == 403, publish
        start = viewer.evaluate(POST_JSON, [f"/api/workflows/{wf_a}/runs", {"input": {}}])
        assert start["status"] == 403, start
        response = viewer.goto(f"{base}/workflows/{wf_b}/designer")
        assert response is not None and response.status == 403

    # ------------------------------------------------ 5. the admin reads the audit log
    page.goto(f"{base}/workflows")
    page.click("nav a[href='/admin/audit']")
    page.wait_for_url(f"{base}/admin/audit")
    page.fill("#f-actor", EDITOR)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    editor_actions = page.locator("tr.audit-row").evaluate_all(
        "rows => rows.map(r => r.dataset.action)"
    )
    assert "workflow.publish" in editor_actions and "run.start" in editor_actions, editor_actions
    published = page.locator('tr.audit-row[data-action="workflow.publish"]', has_text=wf_a)
    assert published.count() == 1
    started = page.locator('tr.audit-row[data-action="run.start"]', has_text=EDITOR)
    assert started.count() == 1
    page.screenshot(path=str(ARTIFACTS_DIR / "access-audit.png"), full_page=True)

    page.goto(f"{base}/admin/audit?action=user.create&actor={server.email}")
    created = page.locator('tr.audit-row[data-action="user.create"] .audit-changes')
    created_text = "\n".join(created.all_inner_texts())
    assert EDITOR in created_text and VIEWER in created_text, created_text

    page.goto(f"{base}/admin/audit?action=grant.create&actor={server.email}")
    grants = page.locator('tr.audit-row[data-action="grant.create"]').all_inner_texts()
    for user_id, level in ((editor_id, "edit"), (viewer_id, "read")):
        found = [t for t in grants if wf_a in t and user_id in t and f'"{level}"' in t]
        assert found, (user_id, level, grants)
