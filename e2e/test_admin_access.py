"""An admin manages access in the browser: a group, a project holding a workflow, a grant
on the project and one on the workflow from the designer's Access button; then an editor's
token sees exactly the granted workflow. Screenshots of the admin pages land in
test-artifacts/ (admin-groups.png, admin-projects.png, workflow-access.png,
admin-tokens.png)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login

pytestmark = pytest.mark.e2e


def _submit(page: Any, form: str) -> None:
    with page.expect_navigation():
        page.locator(f"{form} button[type=submit]").click()


def test_admin_grants_access_from_the_admin_pages(
    page: Any, railyard_server: RailyardServer
) -> None:
    base = railyard_server.base_url
    login(page, railyard_server)
    page.fill("#new-workflow-name", "Invoices")
    with page.expect_navigation():
        page.keyboard.press("Enter")  # the form works from the keyboard
    workflow_id = page.url.split("/workflows/")[1].split("/")[0]

    page.goto(f"{base}/admin/groups")
    page.fill("#new-group-form input[name=name]", "Finance team")
    _submit(page, "#new-group-form")
    assert page.locator("section[aria-label='Group Finance team']").is_visible()
    page.screenshot(path=str(ARTIFACTS_DIR / "admin-groups.png"), full_page=True)

    page.goto(f"{base}/admin/projects")
    page.fill("#new-project-form input[name=name]", "Accounting")
    _submit(page, "#new-project-form")
    page.select_option("#move-form select[name=object]", f"workflow:{workflow_id}")
    page.select_option("#move-form select[name=project_id]", label="Accounting")
    _submit(page, "#move-form")
    project = page.locator("section[aria-label='Project Accounting']")
    assert project.get_by_text("Invoices").is_visible()
    project.locator("select[name=subject]").select_option(label="group Finance team")
    project.locator("select[name=level]").select_option("read")
    with page.expect_navigation():
        project.locator(".grant-form button[type=submit]").click()
    assert page.locator("section[aria-label='Project Accounting'] .grants-table").is_visible()
    page.screenshot(path=str(ARTIFACTS_DIR / "admin-projects.png"), full_page=True)

    page.goto(f"{base}/workflows/{workflow_id}/designer")
    with page.expect_navigation():
        page.click("#access-link")
    page.select_option(".grant-form select[name=subject]", label="group Finance team")
    page.select_option(".grant-form select[name=level]", "edit")
    with page.expect_navigation():
        page.click(".grant-form button[type=submit]")
    assert page.locator(".grants-table").get_by_text("edit").is_visible()
    page.screenshot(path=str(ARTIFACTS_DIR / "workflow-access.png"), full_page=True)

    page.goto(f"{base}/tokens")
    page.fill("#token-name", "e2e script")
    page.select_option("#token-scope", "read")
    with page.expect_navigation():
        page.click("form[action='/tokens'] button[type=submit]")
    token = page.locator("#new-token").inner_text().strip()
    page.goto(f"{base}/admin/tokens")
    assert page.locator("#all-tokens").get_by_text("e2e script").is_visible()
    page.screenshot(path=str(ARTIFACTS_DIR / "admin-tokens.png"), full_page=True)

    # The read token sees the workflow but may not publish it.
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers) as api:
        assert api.get(f"/api/workflows/{workflow_id}").status_code == 200
        assert api.post(f"/api/workflows/{workflow_id}/publish").status_code == 403
    page.goto(f"{base}/admin/tokens")
    with page.expect_navigation():
        page.locator("#all-tokens tr", has_text="e2e script").locator("button").click()
    with httpx.Client(base_url=base, headers=headers) as api:
        assert api.get("/api/workflows").status_code == 401
