"""OAuth2 authorization-code flow (authlib) against a local authlib provider."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import select, update

from backend import crypto
from backend.db.models.credentials import AuditLog, Credential
from backend.runtime import Runtime
from backend.services.connectors import credential_use
from backend.services.connectors import credentials as svc
from connectors import sdk
from tests.fakes.oauth2_provider import OAuth2Provider
from tests.integration.encrypted_settings import settings  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration

CALLBACK = "http://testserver.local/api/credentials/oauth2/callback"
CLIENT_SECRET = "cs-0123456789abcdef-secret"


@pytest.fixture
def provider() -> Iterator[OAuth2Provider]:
    p = OAuth2Provider(expires_in=3600).start()
    p.add_client("railyard", CLIENT_SECRET, CALLBACK)
    yield p
    p.stop()


async def _connect(client: httpx.AsyncClient, provider: OAuth2Provider) -> dict[str, Any]:
    r = await client.post(
        "/api/credentials",
        json={
            "name": "Provider",
            "type": "oauth2",
            "data": {
                "authorize_url": provider.url + "/authorize",
                "token_url": provider.url + "/token",
                "client_id": "railyard",
                "client_secret": CLIENT_SECRET,
                "scope": "read",
            },
        },
    )
    assert r.status_code == 201, r.text
    cred = r.json()
    assert cred["connected"] is False
    start = await client.get(f"/api/credentials/{cred['id']}/connect")
    assert start.status_code in (302, 303), start.text
    authorize = start.headers["location"]
    assert authorize.startswith(provider.url + "/authorize?")
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["redirect_uri"] == [CALLBACK]
    # The browser follows to the provider, which redirects back with a code.
    async with httpx.AsyncClient() as browser:
        consent = await browser.get(authorize)
    assert consent.status_code == 302, consent.text
    back = consent.headers["location"]
    assert back.startswith(CALLBACK)
    done = await client.get(back.replace("http://testserver.local", ""))
    assert done.status_code in (302, 303)
    assert done.headers["location"] == f"/credentials?connected={cred['id']}"
    return (await client.get(f"/api/credentials/{cred['id']}")).json()


async def test_connect_stores_tokens_encrypted_and_refreshes_before_expiry(
    client: httpx.AsyncClient, runtime: Runtime, provider: OAuth2Provider
) -> None:
    cred = await _connect(client, provider)
    assert cred["connected"] is True and cred["token_expires_at"]
    [token] = provider.state.tokens
    body = (await client.get("/api/credentials")).text
    assert token.access_token not in body and CLIENT_SECRET not in body
    async with runtime.sessionmaker() as session:
        row = (await session.execute(select(Credential))).scalar_one()
        assert token.access_token.encode() not in row.ciphertext

    keyring = crypto.keyring_from_settings(runtime.settings)
    info = sdk.ActionInfo("r1", "w1", "s1", 1, "r1:s1", "test.action")
    fresh = await credential_use.resolve_for_action(
        runtime.sessionmaker,
        runtime.catalog,
        keyring,
        cred["id"],
        ("oauth2",),
        info=info,
        publisher_check=False,
    )
    assert fresh["access_token"] == token.access_token
    assert provider.state.token_requests == ["authorization_code"]
    async with httpx.AsyncClient() as api:
        me = await api.get(
            provider.url + "/me", headers={"Authorization": f"Bearer {fresh['access_token']}"}
        )
    assert me.json() == {"user": "ada"}

    # The token is about to expire: the next use refreshes it first (once).
    async with runtime.sessionmaker() as session, session.begin():
        row = (await session.execute(select(Credential))).scalar_one()
        payload = svc.open_payload(keyring, row)
        payload["token"]["expires_at"] = time.time() + 5
        row.ciphertext = svc.seal_payload(keyring, row.id, payload)
    refreshed = await credential_use.resolve_for_action(
        runtime.sessionmaker,
        runtime.catalog,
        keyring,
        cred["id"],
        ("oauth2",),
        info=info,
        refresh_margin=60,
        publisher_check=False,
    )
    assert provider.state.token_requests == ["authorization_code", "refresh_token"]
    assert refreshed["access_token"] != token.access_token
    assert refreshed["expires_at"] > time.time() + 3000
    again = await credential_use.resolve_for_action(
        runtime.sessionmaker,
        runtime.catalog,
        keyring,
        cred["id"],
        ("oauth2",),
        info=info,
        publisher_check=False,
    )
    assert again["access_token"] == refreshed["access_token"]
    assert provider.state.token_requests == ["authorization_code", "refresh_token"]
    async with runtime.sessionmaker() as session:
        actions = list(
            (
                await session.execute(
                    select(AuditLog.action)
                    .where(AuditLog.object_type == "credential")
                    .order_by(AuditLog.id)
                )
            ).scalars()
        )
    assert actions == [
        "credential.create",
        "credential.oauth_start",
        "credential.connect",
        "credential.use",
        "credential.use",
        "credential.use",
    ]


async def test_revoked_refresh_token_needs_reconnect(
    client: httpx.AsyncClient, runtime: Runtime, provider: OAuth2Provider
) -> None:
    cred = await _connect(client, provider)
    for t in provider.state.tokens:
        t.revoked = True
    async with runtime.sessionmaker() as session, session.begin():
        await session.execute(update(Credential).values(token_expires_at=None))
        row = (await session.execute(select(Credential))).scalar_one()
        keyring = crypto.keyring_from_settings(runtime.settings)
        payload = svc.open_payload(keyring, row)
        payload["token"]["expires_at"] = time.time() - 1
        row.ciphertext = svc.seal_payload(keyring, row.id, payload)

    with pytest.raises(sdk.NonRetryableError) as err:
        await credential_use.resolve_for_action(
            runtime.sessionmaker,
            runtime.catalog,
            keyring,
            cred["id"],
            ("oauth2",),
            info=sdk.ActionInfo("r", "w", "s", 1, "r:s", "test.action"),
            publisher_check=False,
        )
    assert err.value.kind == "credential_refresh_failed"
    assert "invalid_grant" in err.value.message


async def test_callback_rejects_unknown_state(client: httpx.AsyncClient, runtime: Runtime) -> None:
    r = await client.get("/api/credentials/oauth2/callback", params={"state": "x", "code": "y"})
    assert r.status_code in (302, 303)
    assert r.headers["location"].startswith("/credentials?error=")
    r = await client.get("/api/credentials/oauth2/callback", params={"error": "access_denied"})
    assert r.headers["location"] == "/credentials?error=access_denied"
