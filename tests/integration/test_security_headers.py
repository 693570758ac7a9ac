"""Security headers on every response; webhook answers are sandboxed and cannot act on
Railyard's origin (cookies, policies, scripts)."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from backend.app import create_app
from backend.runtime import Runtime
from backend.settings import Settings
from backend.web.security_headers import APP_CSP, WEBHOOK_CSP
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


def assert_app_headers(r: httpx.Response) -> None:
    csp = r.headers["content-security-policy"]
    assert csp == APP_CSP
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "same-origin"
    assert r.headers["x-frame-options"] == "DENY"


async def test_security_headers_on_pages_api_static_and_errors(
    client: httpx.AsyncClient,
) -> None:
    for path in (
        "/login",
        "/workflows",
        "/api/workflows",
        "/static/css/app.css",
        "/static/js/app.js",
        "/health",
        "/no/such/page",
        "/api/runs/not-a-uuid",
    ):
        r = await client.get(path)
        assert_app_headers(r)
        assert "strict-transport-security" not in r.headers, path
    r = await client.post("/api/workflows", json={"name": ""})
    assert r.status_code == 400
    assert_app_headers(r)


async def test_hsts_only_when_served_over_https(settings: Settings, runtime: Runtime) -> None:
    for changes in ({"secure_cookies": True}, {"base_url": "https://railyard.example"}):
        app = create_app(msgspec.structs.replace(settings, **changes), runtime)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            r = await c.get("/login")
        assert r.headers["strict-transport-security"].startswith("max-age=31536000")
        assert_app_headers(r)


def respond_pipeline(headers: dict[str, str], body: Any) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.webhook", respond="respond_node"),
            node("answer", "control.respond", status=200, headers=headers, body=body),
        ],
        [edge("hook", "answer")],
    )


async def test_webhook_answers_are_sandboxed(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    html = "<html><body><script>fetch('/api/tokens')</script></body></html>"
    wf = await publish(
        client,
        respond_pipeline(
            {
                "Content-Type": "text/html; charset=utf-8",
                "Set-Cookie": "railyard_session=attacker; Path=/",
                "Content-Security-Policy": "default-src *",
                "X-Frame-Options": "ALLOWALL",
                "X-Custom": "kept",
            },
            html,
        ),
    )
    r = await client.post(wf["webhook_path"], json={})
    assert r.status_code == 200, r.text
    assert r.text == html  # served as the workflow wrote it, but inert:
    assert r.headers["content-security-policy"] == WEBHOOK_CSP
    assert r.headers["content-security-policy"].startswith("sandbox")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert "set-cookie" not in r.headers
    assert "x-frame-options" not in r.headers
    assert r.headers["x-custom"] == "kept"
    assert r.headers["content-type"].startswith("text/html")

    script = await publish(
        client, respond_pipeline({"content-type": "application/javascript"}, "alert(1)")
    )
    r = await client.post(script["webhook_path"], json={})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")

    # the 202 answer and refusals carry the webhook policy too
    plain = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    for method in ("post", "get"):
        r = await getattr(client, method)(plain["webhook_path"])
        assert r.status_code in (202, 405)
        assert r.headers["content-security-policy"] == WEBHOOK_CSP
