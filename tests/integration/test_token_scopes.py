"""API tokens: scopes (read, run, edit, admin), expiry, never stronger than the owner;
service accounts act only through their tokens. All changes audited."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from backend.db.models import ApiToken, AuditLog
from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, node
from tests.integration.rbac import PASSWORD, client_as, grant, make_user

pytestmark = pytest.mark.integration


async def _published(admin: httpx.AsyncClient) -> str:
    wf = (await admin.post("/api/workflows", json={"name": "W"})).json()
    d = diagram([node("hook", "trigger.webhook")], [])
    assert (await admin.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})).json()["ok"]
    assert (await admin.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    return str(wf["id"])


def _bearer(client: httpx.AsyncClient, token: str) -> httpx.AsyncClient:
    """A cookie-less client of the same app sending ``token``."""
    return httpx.AsyncClient(
        transport=client._transport,
        base_url="http://testserver.local",
        headers={"Authorization": f"Bearer {token}"},
    )


async def _token(client: httpx.AsyncClient, scope: str, **extra: Any) -> str:
    r = await client.post("/api/tokens", json={"name": scope, "scopes": [scope], **extra})
    assert r.status_code == 201, r.text
    assert r.json()["scopes"] == [scope]
    return str(r.json()["token"])


async def test_token_scopes_narrow_what_an_admin_token_does(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await _published(client)
    read, run, edit, admin = [await _token(client, s) for s in ("read", "run", "edit", "admin")]
    async with _bearer(client, read) as c:
        assert (await c.get(f"/api/workflows/{wf}")).status_code == 200
        assert (await c.post(f"/api/workflows/{wf}/runs", json={"input": {}})).status_code == 403
        assert (await c.post("/api/tokens", json={"name": "x"})).status_code == 403
    async with _bearer(client, run) as c:
        r = await c.post(f"/api/workflows/{wf}/runs", json={"input": {}})
        assert r.status_code == 201, r.text
        assert (await c.post(f"/api/workflows/{wf}/publish")).status_code == 403
    async with _bearer(client, edit) as c:
        assert (await c.post(f"/api/workflows/{wf}/publish")).status_code == 200
        assert (await c.get(f"/api/workflows/{wf}/grants")).status_code == 403  # manage
        assert (await c.get("/api/admin/groups")).status_code == 403
    async with _bearer(client, admin) as c:
        assert (await c.get(f"/api/workflows/{wf}/grants")).status_code == 200
        assert (await c.get("/api/admin/groups")).status_code == 200


async def test_token_never_stronger_than_its_owner(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    wf = await _published(client)
    async with client_as(settings, runtime, "v@example.com", "viewer") as viewer:
        r = await viewer.post("/api/tokens", json={"name": "t", "scopes": ["admin"]})
        assert r.status_code == 400 and r.json()["field"] == "scopes"
        token = (await viewer.post("/api/tokens", json={"name": "t"})).json()
        assert token["scopes"] == ["read"]  # the strongest a viewer's role allows
    async with _bearer(client, token["token"]) as c:
        assert (await c.get(f"/api/workflows/{wf}")).status_code == 404  # no grant
        assert (await c.get("/api/workflows")).json() == []
    # The owner's grant reaches the token, within its scope.
    async with runtime.sessionmaker() as session:
        owner = (await session.execute(select(ApiToken.user_id))).scalars().all()
    viewer_id = next(iter(set(owner)))
    await grant(runtime, "workflow", wf, f"user:{viewer_id}", "manage")
    async with _bearer(client, token["token"]) as c:
        assert (await c.get(f"/api/workflows/{wf}")).status_code == 200
        assert (await c.post(f"/api/workflows/{wf}/runs", json={"input": {}})).status_code == 403


async def test_expired_token_is_refused(client: httpx.AsyncClient, runtime: Runtime) -> None:
    token = await _token(client, "read", expires_in_days=1)
    async with _bearer(client, token) as c:
        assert (await c.get("/api/workflows")).status_code == 200
    async with runtime.sessionmaker() as session, session.begin():
        await session.execute(
            update(ApiToken).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    async with _bearer(client, token) as c:
        assert (await c.get("/api/workflows")).status_code == 401
    r = await client.post("/api/tokens", json={"name": "x", "expires_in_days": -3})
    assert r.status_code == 400 and r.json()["field"] == "expires_in_days"
    r = await client.post("/api/tokens", json={"name": "x", "scopes": ["root"]})
    assert r.status_code == 400 and r.json()["field"] == "scopes"


async def test_service_account_acts_only_through_its_tokens(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await _published(client)
    r = await client.post(
        "/api/admin/service-accounts", json={"name": "CI bot", "role": "operator"}
    )
    assert r.status_code == 201, r.text
    account = r.json()
    assert account["email"] == "ci-bot@service.railyard.invalid"
    r = await client.post(
        f"/api/admin/service-accounts/{account['id']}/tokens",
        json={"name": "deploy", "scopes": ["run"], "expires_in_days": 30},
    )
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    async with _bearer(client, token) as c:
        # no grant yet: the workflow is hidden
        assert (await c.post(f"/api/workflows/{wf}/runs", json={"input": {}})).status_code == 404
        await grant(runtime, "workflow", wf, f"user:{account['id']}", "run")
        assert (await c.post(f"/api/workflows/{wf}/runs", json={"input": {}})).status_code == 201
        assert (await c.post(f"/api/workflows/{wf}/publish")).status_code == 403
    # it cannot log in interactively, whatever the password
    async with httpx.AsyncClient(
        transport=client._transport, base_url="http://testserver.local"
    ) as anon:
        await anon.get("/login")
        anon.headers["x-csrftoken"] = anon.cookies.get("csrftoken") or ""
        r = await anon.post(
            "/api/auth/login", json={"email": account["email"], "password": PASSWORD}
        )
        assert r.status_code == 401
    # admins see and revoke every token
    listed = (await client.get("/api/admin/tokens")).json()
    mine = next(t for t in listed if t["owner"] == account["email"])
    assert mine["scopes"] == ["run"] and mine["expires_at"] and mine["token"] is None
    assert (await client.delete(f"/api/admin/tokens/{mine['id']}")).status_code == 204
    async with _bearer(client, token) as c:
        assert (await c.get("/api/workflows")).status_code == 401
    async with runtime.sessionmaker() as session:
        actions = (await session.execute(select(AuditLog.action))).scalars().all()
    assert {"user.create", "token.create", "token.revoke", "grant.create"} <= set(actions)


async def test_an_editor_cannot_mint_service_accounts(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    await make_user(runtime, "ed@example.com", "editor")
    async with client_as(settings, runtime, "ed@example.com") as editor:
        r = await editor.post("/api/admin/service-accounts", json={"name": "x"})
        assert r.status_code == 403
        assert (await editor.get("/api/admin/tokens")).status_code == 403
