"""An admin's changes appear on the audit page, which filters from the keyboard and
exports JSON lines; the settings overview masks secrets. Screenshots of both pages."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login

pytestmark = pytest.mark.e2e


def test_audit_page_lists_filters_and_exports(railyard_server: RailyardServer, page: Any) -> None:
    base = railyard_server.base_url
    login(page, railyard_server)
    page.fill("#new-workflow-name", "Audited flow")
    page.click("#create-workflow")
    page.wait_for_url(re.compile(r".*/designer$"))
    workflow_id = page.url.rsplit("/", 2)[-2]

    # the Admin group of the navigation leads there
    page.goto(f"{base}/workflows")
    page.click("nav a[href='/admin/audit']")
    page.wait_for_url(f"{base}/admin/audit")
    row = page.locator(f'tr.audit-row[data-action="workflow.create"]:has-text("{workflow_id}")')
    row.wait_for()
    assert railyard_server.email in row.inner_text()
    assert "Audited flow" in row.locator(".audit-changes").inner_text()

    # filter by action prefix from the keyboard: type, Enter
    page.focus("#f-action")
    page.keyboard.type("workflow.")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*action=workflow\..*"))
    actions = page.locator("tr.audit-row").evaluate_all("rows => rows.map(r => r.dataset.action)")
    assert actions and all(a.startswith("workflow.") for a in actions)
    page.screenshot(path=str(ARTIFACTS_DIR / "admin-audit.png"), full_page=True)

    with page.expect_download() as download_info:
        page.click("#audit-export")
    path = download_info.value.path()
    lines = [json.loads(line) for line in open(path).read().splitlines()]
    assert lines and {e["action"][:9] for e in lines} == {"workflow."}
    assert any(e["object_id"] == workflow_id for e in lines)

    # a malformed time is a clear message on the page, not an error page
    page.goto(f"{base}/admin/audit?since=yesterday")
    assert "since must be an ISO 8601" in page.locator("#audit-filter-error").inner_text()

    page.goto(f"{base}/admin/settings")
    table = page.locator("#settings-table").inner_text()
    assert "RAILYARD_AUDIT_RETENTION_DAYS" in table and "set (hidden)" in table
    encryption_key = page.locator('tr[data-setting="encryption_key"] .setting-value')
    assert encryption_key.inner_text() == "set (hidden)"
    page.screenshot(path=str(ARTIFACTS_DIR / "admin-settings.png"), full_page=True)
