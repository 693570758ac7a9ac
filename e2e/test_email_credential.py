"""Create an SMTP credential, draw Webhook -> Send email, publish, trigger, get the mail.

Everything in the browser is done the way a person does it: the credential is created on
/credentials, the nodes are dragged from the palette and connected with the mouse, the
credential is picked in the node's panel and the recipient is switched to an expression
with the field's "fx" toggle. A real SMTP server (aiosmtpd, with a login) listens on
127.0.0.1. The credential's password must never come back: not in any page or API
response the browser received, nor in /api/credentials.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import icon_drawn, publish
from e2e.nodes_by_type import connect, io_block, node, node_id, select_node
from tests.fakes.smtp import SmtpServer

pytestmark = pytest.mark.e2e

WEBHOOK = "trigger.webhook"
EMAIL = "email.send"
DROP_POSITIONS = {WEBHOOK: (0.2, 0.2), EMAIL: (0.55, 0.2)}

SMTP_USER = "mailer"
SMTP_PASSWORD = "smtp-Pa55word-e2e-7f3c9a1b"  # 16+ characters: the hint shows "••••9a1b"
CREDENTIAL_NAME = "Office relay"
PAYLOAD = {"name": "Ada", "email": "ada@example.com", "order_id": "A-17", "total": 150}


@pytest.fixture
def smtp_server() -> Any:
    server = SmtpServer("plain", users={SMTP_USER: SMTP_PASSWORD}).start()
    try:
        yield server
    finally:
        server.stop()


class ResponseLog:
    """Every response the browser receives, with its body read as it arrives."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, int, bytes]] = []
        self.unread: list[str] = []

    def __call__(self, response: Any) -> None:
        if 300 <= response.status < 400:
            self.bodies.append((response.url, response.status, b""))  # redirects have no body
            return
        try:
            self.bodies.append((response.url, response.status, response.body()))
        except Exception as exc:  # e.g. an SSE stream still open when the page moves on
            self.unread.append(f"{response.url}: {exc}")


def drag_to_canvas(page: Any, node_type: str) -> None:
    canvas = page.locator("#canvas")
    box = canvas.bounding_box()
    assert box, "canvas has no box"
    fx, fy = DROP_POSITIONS[node_type]
    item = page.locator(f'.palette-item[data-type="{node_type}"]')
    item.scroll_into_view_if_needed()
    item.drag_to(canvas, target_position={"x": box["width"] * fx, "y": box["height"] * fy})
    node(page, node_type).wait_for()


def draft_config(page: Any, node_type: str) -> dict[str, Any]:
    nodes = page.evaluate("() => window.railyardDesigner.model.toJSON()")["nodes"]
    return next(n["config"] for n in nodes if n["type"] == node_type)


def wait_for_mail(server: SmtpServer, run_url: str, page: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not server.messages:
        if time.monotonic() > deadline:
            run = page.request.get(run_url).text()
            raise AssertionError(f"no message at the SMTP server after {timeout} s; run: {run}")
        time.sleep(0.1)


def test_email_with_smtp_credential(
    page: Any, railyard_server: RailyardServer, smtp_server: SmtpServer
) -> None:
    server = railyard_server
    responses = ResponseLog()
    page.on("response", responses)
    login(page, server)

    # ------------------------------------------------------------ the credential
    page.goto(f"{server.base_url}/credentials")
    page.select_option("#credential-type", "smtp")
    form = page.locator('form.credential-form[data-type="smtp"]')
    form.wait_for()
    form.locator('input[name="name"]').fill(CREDENTIAL_NAME)
    form.locator('input[name="field.host"]').fill("127.0.0.1")
    form.locator('input[name="field.port"]').fill(str(smtp_server.port))
    form.locator('select[name="field.security"]').select_option("none")
    form.locator('input[name="field.username"]').fill(SMTP_USER)
    password_input = form.locator('input[name="field.password"]')
    assert password_input.get_attribute("type") == "password"
    password_input.fill(SMTP_PASSWORD)
    form.locator('input[name="field.from_address"]').fill("orders@example.com")
    form.locator('button[type="submit"]').click()
    row = page.locator("#credentials-table tr[data-credential-id]", has_text=CREDENTIAL_NAME)
    row.wait_for()
    credential_id = row.get_attribute("data-credential-id")
    assert credential_id
    assert "••••9a1b" in row.inner_text()

    # ------------------------------------------------------------ draw Webhook -> Email
    page.goto(f"{server.base_url}/workflows")
    page.fill("#new-workflow-name", "Order confirmation mail")
    page.click("#create-workflow")
    page.wait_for_url(re.compile(r".*/workflows/[0-9a-f-]+/designer$"))
    # The palette groups Email under its connector, with the connector's icon (Lucide SVG).
    group = page.locator('.palette-group[data-group="connector:email"]')
    group.wait_for()
    assert icon_drawn(group.locator(".palette-group-icon"))
    page.fill("#palette-search", "mail")
    assert page.locator(f'.palette-item[data-type="{WEBHOOK}"]').is_hidden()
    page.fill("#palette-search", "")

    drag_to_canvas(page, WEBHOOK)
    drag_to_canvas(page, EMAIL)
    connect(page, WEBHOOK, "out", EMAIL)
    ids = {t: node_id(page, t) for t in (WEBHOOK, EMAIL)}

    # ------------------------------------------------------------ configure the email
    panel = select_node(page, EMAIL)
    picker = panel.locator('select[data-field="credential"]')
    assert picker.get_attribute("data-kind") == "credential"
    option = picker.locator(f'option[value="{credential_id}"]')
    assert option.inner_text().startswith(CREDENTIAL_NAME)
    new_link = panel.locator("a.credential-new")
    assert new_link.inner_text().strip() == "+ New SMTP server"
    assert "type=smtp" in (new_link.get_attribute("href") or "")
    picker.select_option(credential_id)

    # The recipient comes from the webhook body: switch "To" to an expression with fx.
    panel.locator('.fx-toggle[data-fx-for="to"]').click()
    to_expr = panel.locator('.expression-control [data-field="to"]')
    to_expr.wait_for()
    assert to_expr.get_attribute("data-kind") == "expression"
    to_expr.fill("=[body.email]")
    panel.locator('[data-field="subject"]').fill("Order {{ input.body.order_id }}")
    panel.locator('[data-field="text"]').fill(
        "Hello {{ input.body.name }}, your total is {{ input.body.total }}."
    )

    config = draft_config(page, EMAIL)
    assert config["credential"] == credential_id
    assert config["to"] == "=[body.email]"
    assert config["subject"] == "Order {{ input.body.order_id }}"

    # The panel survives a round trip in expression mode (re-opened from the model).
    select_node(page, WEBHOOK)
    panel = select_node(page, EMAIL)
    assert panel.locator('.fx-toggle[data-fx-for="to"]').get_attribute("aria-pressed") == "true"
    assert panel.locator('[data-field="to"]').input_value() == "=[body.email]"
    assert panel.locator('select[data-field="credential"]').input_value() == credential_id

    page.wait_for_function(
        "() => !document.querySelector('#canvas g.node.has-error')"
        " && document.querySelector('#diagnostics').hidden"
    )

    # ------------------------------------------------------------ publish, trigger
    publish(page)
    page.wait_for_function(
        "() => document.querySelector('#status').textContent.includes('Published version 1')"
    )
    webhook_url = page.locator("#webhook-url code").inner_text().strip()
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-email.png"))
    resp = httpx.post(webhook_url, json=PAYLOAD, timeout=15)
    assert resp.status_code == 202, resp.text
    run_id = resp.json()["run_id"]

    # ------------------------------------------------------------ the mail arrives
    wait_for_mail(smtp_server, f"{server.base_url}/api/runs/{run_id}", page)
    message = smtp_server.messages[0]
    assert smtp_server.envelopes[0] == ("orders@example.com", ["ada@example.com"])
    assert message["To"] == "ada@example.com"
    assert message["Subject"] == "Order A-17"
    assert message.get_content().strip() == "Hello Ada, your total is 150."

    # ------------------------------------------------------------ the run succeeded
    page.goto(f"{server.base_url}/runs/{run_id}")
    page.locator('#run-view[data-status="succeeded"]').wait_for(timeout=30_000)
    page.wait_for_load_state()
    email_step = page.locator(f'section.step[data-step-id="{ids[EMAIL]}"]')
    assert email_step.get_attribute("data-status") == "succeeded"
    output = io_block(email_step, "Output").locator("pre.json").text_content() or ""
    assert '"accepted"' in output and "ada@example.com" in output, output

    # ------------------------------------------------------------ the secret never came back
    api = page.request.get(f"{server.base_url}/api/credentials")
    assert api.status == 200
    listed = {c["id"]: c for c in api.json()}
    assert listed[credential_id]["public"]["password"] == "••••9a1b"
    assert SMTP_PASSWORD not in api.text()
    one = page.request.get(f"{server.base_url}/api/credentials/{credential_id}")
    assert one.status == 200 and SMTP_PASSWORD not in one.text()

    documents = [url for url, status, _ in responses.bodies if status < 300]
    assert any(u.endswith("/credentials") for u in documents), documents
    assert any("/designer/config-panel" in u for u in documents), documents
    leaks = [url for url, _, body in responses.bodies if SMTP_PASSWORD.encode() in body]
    assert leaks == [], f"the SMTP password came back in: {leaks}"
    # Only static files (a navigation may drop them first) and long-lived Server-Sent
    # Events streams may be unreadable; never a page, a fragment or an API answer.
    unread = [u for u in responses.unread if "/static/" not in u and "/events" not in u]
    assert unread == [], unread
    assert SMTP_PASSWORD not in page.content()
