"""Admin management of accounts and sessions, through the JSON API and the pages:
create and invite, role change, deactivate and reactivate, password reset links, sign out
everywhere, session list and revoke; each audited; refused to non-admins."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.db.models import AuditLog
from backend.runtime import Runtime
from backend.settings import Settings
from tests.integration.conftest import ADMIN_EMAIL, login
from tests.integration.rbac import PASSWORD, client_as

pytestmark = pytest.mark.integration

NEW_PASSWORD = "copper kettle on the stove"


async def _actions(runtime: Runtime, *prefixes: str) -> list[str]:
    async with runtime.sessionmaker() as session:
        rows = (await session.execute(select(AuditLog.action).order_by(AuditLog.id))).scalars()
        return [a for a in rows if a.startswith(prefixes)]


@asynccontextmanager
async def _anon(settings: Settings, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(settings, runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
        await c.get("/login")
        c.headers["x-csrftoken"] = c.cookies["csrftoken"]
        yield c


async def test_invite_set_password_change_role_deactivate_reactivate_over_the_api(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    created = await client.post(
        "/api/admin/users", json={"email": "Eve@Example.com", "role": "editor"}
    )
    assert created.status_code == 201, created.text
    body = created.json()
    eve = body["user"]
    assert eve["email"] == "eve@example.com" and eve["role"] == "editor"
    assert eve["has_password"] is False and eve["active"] is True
    invite = body["invitation"]
    assert invite["purpose"] == "invite"
    assert invite["url"].startswith("http://testserver.local/reset-password/")

    async with _anon(settings, runtime) as browser:
        path = invite["url"].removeprefix("http://testserver.local")
        form_page = await browser.get(path)
        assert form_page.status_code == 200 and "eve@example.com" in form_page.text
        csrf = browser.cookies["csrftoken"]
        weak = await browser.post(
            path,
            data={"_csrf_token": csrf, "password": "password12345", "confirm": "password12345"},
        )
        assert weak.status_code == 400 and "too common" in weak.text
        differ = await browser.post(
            path, data={"_csrf_token": csrf, "password": NEW_PASSWORD, "confirm": "other thing"}
        )
        assert differ.status_code == 400 and "differ" in differ.text
        done = await browser.post(
            path, data={"_csrf_token": csrf, "password": NEW_PASSWORD, "confirm": NEW_PASSWORD}
        )
        assert done.status_code == 200 and "Your password is set" in done.text
        used = await browser.get(path)
        assert used.status_code == 410
        await login(browser, "eve@example.com", NEW_PASSWORD)

        changed = await client.patch(f"/api/admin/users/{eve['id']}", json={"role": "viewer"})
        assert changed.status_code == 200 and changed.json()["role"] == "viewer"
        bad_role = await client.patch(f"/api/admin/users/{eve['id']}", json={"role": "root"})
        assert bad_role.status_code == 400 and bad_role.json()["field"] == "role"

        off = await client.post(f"/api/admin/users/{eve['id']}/deactivate")
        assert off.status_code == 200 and off.json()["active"] is False
        assert (await browser.get("/api/auth/me")).status_code == 401
        on = await client.post(f"/api/admin/users/{eve['id']}/reactivate")
        assert on.json()["active"] is True
        await login(browser, "eve@example.com", NEW_PASSWORD)

    assert await _actions(runtime, "user.") == [
        "user.create",  # the admin (fixture)
        "user.create",
        "user.password_reset",  # invitation issued
        "user.password_reset",  # completed
        "user.role_change",
        "user.deactivate",
        "user.reactivate",
    ]


async def test_create_with_password_checks_policy_and_duplicates(client: httpx.AsyncClient) -> None:
    weak = await client.post(
        "/api/admin/users", json={"email": "w@example.com", "password": "short"}
    )
    assert weak.status_code == 400 and weak.json()["field"] == "password"
    ok = await client.post(
        "/api/admin/users",
        json={"email": "w@example.com", "password": NEW_PASSWORD, "role": "operator"},
    )
    assert ok.status_code == 201 and ok.json()["invitation"] is None
    assert ok.json()["user"]["has_password"] is True
    dup = await client.post("/api/admin/users", json={"email": "W@example.com"})
    assert dup.status_code == 409 and dup.json()["field"] == "email"
    bad = await client.post("/api/admin/users", json={"email": "nope"})
    assert bad.status_code == 400 and bad.json()["field"] == "email"
    extra = await client.post("/api/admin/users", json={"email": "x@example.com", "admin": 1})
    assert extra.status_code == 400


async def test_reset_sign_out_everywhere_and_sessions_over_the_api(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    async with client_as(settings, runtime, "op@example.com", "operator") as operator:
        me = (await operator.get("/api/auth/me")).json()
        sessions = (await client.get("/api/admin/sessions")).json()
        assert {s["email"] for s in sessions} == {ADMIN_EMAIL, "op@example.com"}
        mine = (await client.get(f"/api/admin/sessions?user_id={me['id']}")).json()
        assert len(mine) == 1 and mine[0]["user_agent"].startswith("python-httpx")
        assert (await client.delete(f"/api/admin/sessions/{mine[0]['id']}")).status_code == 204
        assert (await operator.get("/api/auth/me")).status_code == 401
        assert (await client.delete(f"/api/admin/sessions/{mine[0]['id']}")).status_code == 404

        await login(operator, "op@example.com", PASSWORD)
        ended = await client.post(f"/api/admin/users/{me['id']}/sign-out-everywhere")
        assert ended.status_code == 200 and ended.json() == {"sessions_ended": 1}
        assert (await operator.get("/api/auth/me")).status_code == 401

        await login(operator, "op@example.com", PASSWORD)
        reset = await client.post(f"/api/admin/users/{me['id']}/password-reset")
        assert reset.status_code == 200 and reset.json()["purpose"] == "reset"
        assert (await operator.get("/api/auth/me")).status_code == 401
        refused = await operator.post(
            "/api/auth/login", json={"email": "op@example.com", "password": PASSWORD}
        )
        assert refused.status_code == 401
    assert "session.revoke" in await _actions(runtime, "session.")


async def test_admin_cannot_deactivate_themselves_and_unknown_users_are_404(
    client: httpx.AsyncClient,
) -> None:
    me = (await client.get("/api/auth/me")).json()
    own = await client.post(f"/api/admin/users/{me['id']}/deactivate")
    assert own.status_code == 409 and "your own account" in own.json()["detail"]
    unknown = "00000000-0000-0000-0000-000000000000"
    assert (await client.post(f"/api/admin/users/{unknown}/deactivate")).status_code == 404
    assert (await client.post(f"/api/admin/users/{unknown}/password-reset")).status_code == 404
    assert (await client.get(f"/api/admin/users/{unknown}")).status_code == 404


async def test_non_admins_get_403_and_no_admin_links(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    async with client_as(settings, runtime, "ed@example.com", "editor") as editor:
        assert (await editor.get("/api/admin/users")).status_code == 403
        assert (await editor.get("/api/admin/sessions")).status_code == 403
        page = await editor.get("/workflows")
        assert 'href="/admin/users"' not in page.text
        assert 'href="/account"' in page.text
    page = await client.get("/workflows")
    assert 'href="/admin/users"' in page.text and 'href="/admin/sessions"' in page.text


async def test_users_page_create_invite_reset_and_sessions_page(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    page = await client.get("/admin/users")
    assert page.status_code == 200 and ADMIN_EMAIL in page.text
    csrf = client.cookies["csrftoken"]
    invited = await client.post(
        "/admin/users",
        data={"_csrf_token": csrf, "email": "pat@example.com", "role": "operator", "password": ""},
    )
    assert invited.status_code == 201
    assert "Created pat@example.com (operator)." in invited.text
    assert re.search(
        r'id="password-link">http://testserver.local/reset-password/\S+<', invited.text
    )
    weak = await client.post(
        "/admin/users",
        data={"_csrf_token": csrf, "email": "sam@example.com", "role": "viewer", "password": "x"},
    )
    assert weak.status_code == 400 and "at least 12 characters" in weak.text
    assert 'value="sam@example.com"' in weak.text  # the form keeps what was typed
    users = (await client.get("/api/admin/users")).json()
    pat = next(u for u in users if u["email"] == "pat@example.com")
    role = await client.post(
        f"/admin/users/{pat['id']}/role", data={"_csrf_token": csrf, "role": "editor"}
    )
    assert role.status_code in (302, 303) and role.headers["location"] == "/admin/users"
    reset = await client.post(
        f"/admin/users/{pat['id']}/reset-password", data={"_csrf_token": csrf}
    )
    assert reset.status_code == 200 and "was reset" in reset.text
    assert "Password reset link" in reset.text
    off = await client.post(f"/admin/users/{pat['id']}/deactivate", data={"_csrf_token": csrf})
    assert off.status_code in (302, 303)
    me = (await client.get("/api/auth/me")).json()
    own = await client.post(f"/admin/users/{me['id']}/deactivate", data={"_csrf_token": csrf})
    assert own.status_code == 409 and "your own account" in own.text
    sessions = await client.get("/admin/sessions")
    assert sessions.status_code == 200 and ADMIN_EMAIL in sessions.text
    assert await _actions(runtime, "user.role_change", "user.deactivate") == [
        "user.role_change",
        "user.deactivate",
    ]


async def test_account_page_lists_own_sessions_and_signs_out_everywhere(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/account")
    assert page.status_code == 200 and "this browser" in page.text
    assert 'id="sign-out-everywhere"' in page.text
    out = await client.post(
        "/account/sign-out-everywhere", data={"_csrf_token": client.cookies["csrftoken"]}
    )
    assert out.status_code in (302, 303) and out.headers["location"] == "/login"
    assert (await client.get("/api/auth/me")).status_code == 401
