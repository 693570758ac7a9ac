"""A webhook's own secrets (auth header, signatures, cookies) never land in run data."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail

pytestmark = pytest.mark.integration

TOKEN = "s3cr3t"
HMAC_KEY = "hmac-key-never-stored"
TENANT_SECRET = "tenant-secret-value-77"
PER_HOOK_SECRET = "per-hook-secret-value-88"
STORED_TABLES = (
    "runs",
    "step_runs",
    "attempts",
    "events",
    "webhook_test_calls",
    "webhook_deliveries",
    "audit_log",
)


@pytest.fixture(scope="session")
def settings(settings: Settings) -> Settings:
    """The integration settings plus one extra header name to redact everywhere."""
    return msgspec.structs.replace(settings, redact_headers=("X-Tenant-Secret",))


def echo_pipeline(sink_url: str, **hook_config: Any) -> dict[str, Any]:
    """Webhook -> Set (copies headers and auth) -> HTTP Request posting it to the sink."""
    return diagram(
        [
            node("hook", "trigger.webhook", **hook_config),
            node("copy", "control.set", mapping={"seen": "=headers", "auth": "=auth"}),
            node("send", "http.request", method="POST", url=sink_url, body="=$"),
        ],
        [edge("hook", "copy"), edge("copy", "send")],
    )


def without_own_csrf_token(page: str, token: str) -> str:
    """A page minus the places the base template puts the *viewer's own* CSRF token (the
    meta tag, htmx's header, form fields), which belong to the page, not to run data."""
    for place in (
        f'<meta name="csrf-token" content="{token}">',
        f'"X-CSRFToken": "{token}"',
        f'name="_csrf_token" value="{token}"',
    ):
        page = page.replace(place, "")
    return page


async def dump(runtime: Runtime) -> str:
    """Every row of the tables that hold run data, as text."""
    parts = []
    async with runtime.engine.connect() as conn:
        for table in STORED_TABLES:
            rows = await conn.execute(text(f"select t::text from {table} t"))
            parts.extend(r for (r,) in rows)
    return "\n".join(parts)


async def test_webhook_secrets_not_stored(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    """Shared case webhook-secrets-not-stored: header token, HMAC (GitHub) and a logged-in
    browser's cookies reach the webhook; no copy of them is stored or shown anywhere."""
    session_cookie = client.cookies.get("railyard_session")
    csrf_cookie = client.cookies.get("csrftoken")
    assert session_cookie and csrf_cookie

    token_hook = await publish(
        client,
        echo_pipeline(sink.url, auth="header", redact_headers="X-Per-Hook, X-Other"),
    )
    r = await client.put(
        f"/api/workflows/{token_hook['id']}/webhook/secret", json={"secret": TOKEN}
    )
    assert r.status_code == 204
    hmac_hook = await publish(client, echo_pipeline(sink.url, auth="hmac", hmac_preset="github"))
    r = await client.put(
        f"/api/workflows/{hmac_hook['id']}/webhook/secret", json={"secret": HMAC_KEY}
    )
    assert r.status_code == 204

    # 1. header token; the logged-in client's session and CSRF cookies and its X-CSRFToken
    # header ride along, as from a browser tab
    r = await client.post(
        token_hook["webhook_path"],
        json={"order": 1},
        headers={
            "authorization": f"Bearer {TOKEN}",
            "x-tenant-secret": TENANT_SECRET,
            "x-per-hook": PER_HOOK_SECRET,
            "x-visible": "kept",
        },
    )
    assert r.status_code == 202, r.text
    token_run = r.json()["run_id"]

    # 2. a GitHub delivery: both signature headers GitHub sends
    body = json.dumps({"action": "opened"}).encode()
    signature = "sha256=" + hmac.new(HMAC_KEY.encode(), body, hashlib.sha256).hexdigest()
    legacy = "sha1=" + hmac.new(HMAC_KEY.encode(), body, hashlib.sha1).hexdigest()
    r = await client.post(
        hmac_hook["webhook_path"],
        content=body,
        headers={
            "content-type": "application/json",
            "x-hub-signature-256": signature,
            "x-hub-signature": legacy,
            "x-github-event": "pull_request",
        },
    )
    assert r.status_code == 202, r.text
    hmac_run = r.json()["run_id"]

    # 3. a test call while the designer listens (its input is kept for field mapping)
    r = await client.post(f"/api/workflows/{token_hook['id']}/webhook/listen")
    assert r.status_code == 200
    test_path = token_hook["webhook_path"].replace("/hooks/", "/hooks/test/", 1)
    r = await client.post(test_path, json={}, headers={"authorization": TOKEN})
    assert r.status_code == 200, r.text

    # 4. a refused request (wrong signature) is audited without its header value
    r = await client.post(
        hmac_hook["webhook_path"],
        content=body,
        headers={"content-type": "application/json", "x-hub-signature-256": "sha256=" + "0" * 64},
    )
    assert r.status_code == 401

    for run_id in (token_run, hmac_run):
        assert await wait_for_run(runtime, run_id) == "succeeded"

    secrets = {
        "token": TOKEN,
        "signature": signature.removeprefix("sha256="),
        "legacy signature": legacy.removeprefix("sha1="),
        "session cookie": session_cookie,
        "csrf token": csrf_cookie,
        "extra header (setting)": TENANT_SECRET,
        "extra header (webhook)": PER_HOOK_SECRET,
    }

    # the run still knows that and how the request was authenticated
    detail = await run_detail(client, token_run)
    assert detail["input"]["auth"] == {
        "kind": "header",
        "verified": True,
        "header": "authorization",
    }
    headers = detail["input"]["headers"]
    for name in ("authorization", "cookie", "x-csrftoken", "x-tenant-secret", "x-per-hook"):
        assert headers[name] == "[redacted]", name
    assert headers["x-visible"] == "kept"
    hmac_detail = await run_detail(client, hmac_run)
    assert hmac_detail["input"]["auth"] == {"kind": "hmac", "verified": True, "scheme": "github"}
    assert hmac_detail["input"]["headers"]["x-hub-signature-256"] == "[redacted]"
    assert hmac_detail["input"]["headers"]["x-github-event"] == "pull_request"

    # what the workflow sent on is redacted as well (it only ever saw the redacted input)
    assert len(sink.requests) == 2
    outbound = b"".join(req.body for req in sink.requests).decode()

    # every table holding run data, the API answers and the pages
    answers = [await dump(runtime), outbound]
    for run_id in (token_run, hmac_run):
        answers.append((await client.get(f"/api/runs/{run_id}")).text)
        page = (await client.get(f"/runs/{run_id}")).text
        answers.append(without_own_csrf_token(page, csrf_cookie))
    answers.append((await client.get("/api/runs")).text)
    answers.append((await client.get(f"/api/workflows/{token_hook['id']}/webhook/test-call")).text)
    for wf in (token_hook, hmac_hook):
        answers.append((await client.get(f"/api/workflows/{wf['id']}/webhook/deliveries")).text)
        page = (await client.get(f"/workflows/{wf['id']}/deliveries")).text
        answers.append(without_own_csrf_token(page, csrf_cookie))
    everything = "\n".join(answers)
    assert "[redacted]" in everything
    leaked = [what for what, value in secrets.items() if value in everything]
    assert leaked == []
