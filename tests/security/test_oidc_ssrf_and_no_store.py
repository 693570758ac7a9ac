"""Finding 12: single sign-on reaches the identity provider only through the SSRF guard,
and answers to authenticated requests are never cached.

The discovery document, the key set (``jwks_uri``) and the token exchange
(``token_endpoint``) were fetched with a plain HTTP client: an issuer URL (set by an
admin) or the endpoints a provider names could point Railyard at loopback, private or
cloud-metadata addresses. Pages and API answers of a signed-in user carried no
``Cache-Control``, so a shared browser's cache or a proxy could keep them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from msgspec import structs

from backend.app import create_app
from backend.runtime import Runtime
from backend.settings import Settings
from tests.http_sink import HttpSink, Recorded

pytestmark = pytest.mark.integration


def _provider(sink: HttpSink, *, token_host: str, jwks_host: str) -> None:
    """``sink`` plays a provider whose issuer is ``http://localhost:<port>`` and whose
    token endpoint and key set are at the given hosts (same port)."""
    port = urlsplit(sink.url).port
    issuer = f"http://localhost:{port}"

    def answer(request: Recorded, _: int) -> tuple[int, Any]:
        if request.path.startswith("/.well-known/openid-configuration"):
            return 200, {
                "issuer": issuer,
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"http://{token_host}:{port}/token",
                "jwks_uri": f"http://{jwks_host}:{port}/jwks",
            }
        if request.path.startswith("/token"):
            return 200, {"access_token": "a", "token_type": "Bearer", "id_token": "x.y.z"}
        return 200, {"keys": []}

    sink.handler = answer


async def _browser(
    settings: Settings, runtime: Runtime, monkeypatch: pytest.MonkeyPatch, **changes: Any
) -> httpx.AsyncClient:
    sso = structs.replace(
        settings,
        oidc_client_id="railyard",
        oidc_client_secret="secret",
        http_allow_private=False,
        **changes,
    )
    monkeypatch.setattr(runtime, "settings", sso)
    transport = httpx.ASGITransport(app=create_app(sso, runtime))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver.local")


def _paths(sink: HttpSink) -> list[str]:
    return [r.path.split("?")[0] for r in sink.requests]


async def test_discovery_at_a_loopback_issuer_is_refused(
    settings: Settings, runtime: Runtime, monkeypatch: pytest.MonkeyPatch, sink: HttpSink
) -> None:
    async with await _browser(settings, runtime, monkeypatch, oidc_issuer=sink.url) as browser:
        r = await browser.get("/login/oidc")
    assert r.status_code == 502 and "loopback" in r.text, r.text
    assert sink.requests == []


@pytest.mark.parametrize(
    ("token_host", "jwks_host", "reached"),
    [
        ("127.0.0.1", "localhost", ["/.well-known/openid-configuration"]),
        ("localhost", "127.0.0.1", ["/.well-known/openid-configuration", "/token"]),
    ],
)
async def test_endpoints_the_provider_names_go_through_the_guard(
    settings: Settings,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    sink: HttpSink,
    token_host: str,
    jwks_host: str,
    reached: list[str],
) -> None:
    """The issuer's host is allowed (``RAILYARD_HTTP_ALLOWLIST``: localhost); the token
    endpoint or key set it names on a loopback address is not: no request reaches it."""
    _provider(sink, token_host=token_host, jwks_host=jwks_host)
    issuer = f"http://localhost:{urlsplit(sink.url).port}"
    browser = await _browser(
        settings, runtime, monkeypatch, oidc_issuer=issuer, http_allowlist=("localhost",)
    )
    async with browser:
        start = await browser.get("/login/oidc")
        assert start.status_code in (302, 303), start.text
        state = parse_qs(urlsplit(start.headers["location"]).query)["state"][0]
        r = await browser.get(f"/login/oidc/callback?state={state}&code=c0de")
    assert r.status_code == 502 and "loopback" in r.text, r.text
    assert _paths(sink) == reached


async def test_authenticated_answers_are_not_stored(client: httpx.AsyncClient) -> None:
    for path in ("/workflows", "/api/workflows", "/account", "/api/auth/me"):
        r = await client.get(path)
        assert r.status_code == 200, path
        assert r.headers["cache-control"] == "no-store", path
    token = (await client.post("/api/tokens", json={"name": "t", "scopes": ["read"]})).json()
    async with httpx.AsyncClient(
        transport=client._transport,
        base_url=str(client.base_url),
        headers={"Authorization": f"Bearer {token['token']}"},
    ) as bearer:
        assert (await bearer.get("/api/workflows")).headers["cache-control"] == "no-store"
    async with httpx.AsyncClient(
        transport=client._transport, base_url=str(client.base_url)
    ) as anonymous:
        login = await anonymous.get("/login")
        assert "no-store" not in login.headers.get("cache-control", "")
        css = await anonymous.get("/static/css/app.css")
        assert css.status_code == 200 and "no-store" not in css.headers.get("cache-control", "")
