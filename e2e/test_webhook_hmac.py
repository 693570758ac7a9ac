"""Configure a GitHub-signed webhook in the designer, then see one run and one rejection.

The webhook node is dropped on the canvas and set to HMAC (GitHub preset) in its panel; the
secret is typed into the panel's write-only field; a test call is captured with "Listen for
test call"; after publishing, a signed and an unsigned request are sent, and the workflow's
"Webhook deliveries" page shows one accepted delivery (a run) and one rejection with its
reason.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.nodes_by_type import drag_from_palette, node_id, select_node

pytestmark = pytest.mark.e2e

SECRET = "e2e signing secret"
PAYLOAD = (
    Path(__file__).parent.parent / "tests" / "fixtures" / "github-push-tag-deleted.json"
).read_bytes()


def github_headers(body: bytes, secret: str | None) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "x-github-event": "push",
        "x-github-delivery": str(uuid.uuid4()),
    }
    if secret is not None:
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers["x-hub-signature-256"] = f"sha256={digest}"
    return headers


def test_webhook_hmac_signed_and_unsigned(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    login(page, server)
    page.fill("#new-workflow-name", "GitHub pushes")
    page.click("#create-workflow")
    page.wait_for_url(re.compile(r".*/workflows/[0-9a-f-]+/designer$"))
    workflow_id = page.url.rstrip("/").split("/")[-2]
    page.locator(".palette-item").first.wait_for()

    drag_from_palette(page, "trigger.webhook")
    assert node_id(page, "trigger.webhook")
    form = select_node(page, "trigger.webhook")
    form.locator('[data-field="auth"]').select_option("hmac")
    form.locator('[data-field="hmac_preset"]').select_option("github")
    form.locator('[data-field="delivery_id_header"]').fill("X-GitHub-Delivery")
    section = form.locator(".webhook-section")
    section.locator("#webhook-secret").fill(SECRET)
    section.locator("#webhook-secret-save").click()
    page.wait_for_function(
        "() => /Secret saved/.test(document.querySelector('#webhook-secret-state').textContent)"
    )
    assert section.locator("#webhook-secret").input_value() == ""  # never shown back

    # Listen for a test call and map fields from it.
    page.click("#save-btn")
    page.wait_for_function("() => /Saved/.test(document.querySelector('#status').textContent)")
    test_url = section.locator(".webhook-test-url").inner_text()
    section.locator("#webhook-listen").click()
    page.wait_for_function(
        "() => /Listening/.test(document.querySelector('#webhook-test-status').textContent)"
    )
    r = httpx.post(test_url, content=PAYLOAD, headers=github_headers(PAYLOAD, SECRET))
    assert r.status_code == 200, r.text
    output = section.locator("#webhook-test-output")
    output.wait_for()
    assert "refs/tags/simple-tag" in output.inner_text()

    page.click("#publish-btn")
    page.locator("#version-badge:not([hidden])").wait_for()
    hook_url = page.locator("#webhook-url code").inner_text().strip()

    signed = httpx.post(hook_url, content=PAYLOAD, headers=github_headers(PAYLOAD, SECRET))
    assert signed.status_code == 202, signed.text
    unsigned = httpx.post(hook_url, content=PAYLOAD, headers=github_headers(PAYLOAD, None))
    assert unsigned.status_code == 401

    page.goto(f"{server.base_url}/workflows/{workflow_id}/deliveries")
    rows = page.locator("tr.delivery-row")
    page.wait_for_function("() => document.querySelectorAll('tr.delivery-row').length >= 2")
    accepted = page.locator('tr.delivery-row[data-outcome="accepted"]')
    rejected = page.locator('tr.delivery-row[data-outcome="rejected"]')
    assert accepted.count() == 1
    assert rejected.count() == 1  # the unsigned call; the test call was signed
    assert "X-Hub-Signature-256" in rejected.first.inner_text()
    assert rows.count() == 2
    page.screenshot(path=str(ARTIFACTS_DIR / "webhook-deliveries.png"), full_page=True)
    accepted.locator("a").click()
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]+$"))
    page.locator("#run-view").wait_for()
