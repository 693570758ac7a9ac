"""Local accounts: throttling and lockout (per account and per address), the generic
error, admin reset links, deactivation, sign out everywhere, and their audit rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import pytest_asyncio
from msgspec import structs
from sqlalchemy import select

from backend.app import create_app
from backend.db.models import AuditLog, LoginThrottle, User
from backend.runtime import Runtime
from backend.services.identity import accounts, api_tokens, login_sessions, password_links
from backend.services.identity.login_throttle import ThrottlePolicy
from backend.services.identity.passwords import WeakPassword
from backend.settings import Settings
from tests.integration.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, login

pytestmark = pytest.mark.integration

ADA = "ada@example.com"
ADA_PASSWORD = "quiet harbor lantern 7"
POLICY = ThrottlePolicy()


async def _user(runtime: Runtime, email: str = ADA, password: str | None = ADA_PASSWORD) -> User:
    async with runtime.sessionmaker() as session, session.begin():
        return await accounts.create_user(session, email, password, role="editor")


async def _actions(runtime: Runtime) -> list[tuple[str, str, dict[str, object]]]:
    async with runtime.sessionmaker() as session:
        rows = await session.execute(select(AuditLog).order_by(AuditLog.id))
        return [(r.action, r.object_id, r.details) for r in rows.scalars()]


def _app_client(settings: Settings, runtime: Runtime, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(settings, runtime), client=(address, 5000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver.local")


@pytest_asyncio.fixture
async def anon(settings: Settings, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """An anonymous client (from 10.0.0.1) with the CSRF header set."""
    async with _app_client(settings, runtime, "10.0.0.1") as c:
        await c.get("/login")
        c.headers["x-csrftoken"] = c.cookies["csrftoken"]
        yield c


async def _try(c: httpx.AsyncClient, email: str, password: str) -> httpx.Response:
    return await c.post("/api/auth/login", json={"email": email, "password": password})


async def test_same_error_for_unknown_user_wrong_password_and_deactivated(
    anon: httpx.AsyncClient, runtime: Runtime
) -> None:
    user = await _user(runtime)
    unknown = await _try(anon, "nobody@example.com", ADA_PASSWORD)
    wrong = await _try(anon, ADA, "not the password at all")
    async with runtime.sessionmaker() as session, session.begin():
        await accounts.create_user(session, ADMIN_EMAIL, ADMIN_PASSWORD, role="admin")
        await accounts.set_active(session, user.id, False)
    inactive = await _try(anon, ADA, ADA_PASSWORD)
    assert unknown.status_code == wrong.status_code == inactive.status_code == 401
    assert unknown.json() == wrong.json() == inactive.json()
    assert unknown.json()["detail"] == "wrong email or password"
    failed = [(o, d["reason"]) for a, o, d in await _actions(runtime) if a == "auth.login_failed"]
    assert failed == [
        ("nobody@example.com", "unknown_user"),
        (ADA, "wrong_password"),
        (ADA, "inactive"),
    ]


async def test_account_lockout_after_five_failures_refuses_even_the_right_password(
    anon: httpx.AsyncClient, runtime: Runtime
) -> None:
    await _user(runtime)
    for _ in range(POLICY.account_limit - 1):
        assert (await _try(anon, ADA, "a wrong password here")).status_code == 401
    assert (await _try(anon, ADA, "a wrong password here")).status_code == 401  # 5th: locks
    locked = await _try(anon, ADA, ADA_PASSWORD)
    assert locked.status_code == 429
    assert 14 * 60 < int(locked.headers["retry-after"]) <= 15 * 60
    assert "Too many failed sign-in attempts" in locked.json()["detail"]
    actions = await _actions(runtime)
    lockouts = [(o, d["scope"]) for a, o, d in actions if a == "auth.lockout"]
    assert lockouts == [(ADA, "account")]
    assert ("auth.login_failed", ADA, {"reason": "locked", "scope": "account"}) in actions
    # another account from the same address is not affected
    await _user(runtime, "bob@example.com", "another fine passphrase")
    assert (await _try(anon, "bob@example.com", "another fine passphrase")).status_code == 200


async def test_lock_ends_after_lockout_and_success_clears_the_counter(runtime: Runtime) -> None:
    await _user(runtime)
    start = datetime.now(UTC)
    async with runtime.sessionmaker() as session, session.begin():
        for i in range(POLICY.account_limit):
            outcome = await accounts.sign_in(
                session,
                ADA,
                "wrong wrong wrong",
                address=None,
                policy=POLICY,
                now=start + timedelta(seconds=i),
            )
            assert outcome.user is None and outcome.lock is None
        locked = await accounts.sign_in(
            session,
            ADA,
            ADA_PASSWORD,
            address=None,
            policy=POLICY,
            now=start + timedelta(minutes=14),
        )
        assert locked.lock is not None and locked.lock.scope == "account"
        later = start + POLICY.lockout + timedelta(seconds=5)
        ok = await accounts.sign_in(
            session, ADA, ADA_PASSWORD, address=None, policy=POLICY, now=later
        )
        assert ok.user is not None and ok.user.email == ADA
        rows = (await session.execute(select(LoginThrottle))).scalars().all()
        assert rows == []


async def test_failures_outside_the_window_do_not_add_up(runtime: Runtime) -> None:
    await _user(runtime)
    start = datetime.now(UTC)
    async with runtime.sessionmaker() as session, session.begin():
        for i in range(POLICY.account_limit * 2):
            # one failure every 4 minutes: never 5 within 15 minutes of a window's start
            now = start + timedelta(minutes=4 * i)
            outcome = await accounts.sign_in(
                session, ADA, "wrong wrong wrong", address=None, policy=POLICY, now=now
            )
            assert outcome.lock is None, i


async def test_address_lockout_across_accounts(settings: Settings, runtime: Runtime) -> None:
    policy = ThrottlePolicy(account_limit=100, address_limit=8)
    await _user(runtime)
    now = datetime.now(UTC)
    async with runtime.sessionmaker() as session, session.begin():
        for i in range(policy.address_limit):
            outcome = await accounts.sign_in(
                session,
                f"guess{i}@example.com",
                "wrong wrong wrong",
                address="203.0.113.9",
                policy=policy,
                now=now,
            )
            assert outcome.lock is None
        # the address is locked, even for a right password of another account ...
        blocked = await accounts.sign_in(
            session, ADA, ADA_PASSWORD, address="203.0.113.9", policy=policy, now=now
        )
        assert blocked.lock is not None and blocked.lock.scope == "address"
        # ... while the same account signs in from elsewhere
        ok = await accounts.sign_in(
            session, ADA, ADA_PASSWORD, address="198.51.100.1", policy=policy, now=now
        )
        assert ok.user is not None
    lockouts = [(o, d["scope"]) for a, o, d in await _actions(runtime) if a == "auth.lockout"]
    assert lockouts == [("203.0.113.9", "address")]


async def test_address_limit_over_http_from_settings(
    settings: Settings, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    limited = structs.replace(settings, login_address_max_failures=3, login_max_failures=50)
    monkeypatch.setattr(runtime, "settings", limited)
    async with _app_client(limited, runtime, "192.0.2.44") as c:
        await c.get("/login")
        c.headers["x-csrftoken"] = c.cookies["csrftoken"]
        for i in range(3):
            assert (await _try(c, f"x{i}@example.com", "wrong wrong wrong")).status_code == 401
        r = await _try(c, "x9@example.com", "wrong wrong wrong")
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    async with _app_client(limited, runtime, "192.0.2.45") as other:
        await other.get("/login")
        other.headers["x-csrftoken"] = other.cookies["csrftoken"]
        assert (await _try(other, "x9@example.com", "wrong wrong wrong")).status_code == 401


async def test_login_form_shows_the_throttle_message(
    settings: Settings, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    limited = structs.replace(settings, login_max_failures=1)
    monkeypatch.setattr(runtime, "settings", limited)
    async with _app_client(limited, runtime, "192.0.2.50") as c:
        await c.get("/login")
        form = {"_csrf_token": c.cookies["csrftoken"], "email": ADA, "password": "nope nope nope"}
        first = await c.post("/login", data=form)
        assert first.status_code == 401 and "Wrong email or password." in first.text
        second = await c.post("/login", data=form)
        assert second.status_code == 429 and "Too many failed sign-in attempts" in second.text
        assert int(second.headers["retry-after"]) > 0


async def test_sign_out_everywhere_by_the_user(
    settings: Settings, runtime: Runtime, anon: httpx.AsyncClient
) -> None:
    await _user(runtime)
    async with _app_client(settings, runtime, "10.0.0.2") as laptop:
        await login(laptop, ADA, ADA_PASSWORD)
        await login(anon, ADA, ADA_PASSWORD)
        mine = (await anon.get("/api/auth/sessions")).json()
        assert len(mine) == 2 and {s["address"] for s in mine} == {"10.0.0.1", "10.0.0.2"}
        assert all("token" not in key for s in mine for key in s)
        r = await anon.post("/api/auth/sign-out-everywhere")
        assert r.status_code == 200 and r.json() == {"sessions_ended": 2}
        assert (await laptop.get("/api/auth/me")).status_code == 401
        assert (await anon.get("/api/auth/me")).status_code == 401
    revokes = [d for a, _, d in await _actions(runtime) if a == "session.revoke"]
    assert revokes == [{"all": True, "sessions": 2}]


async def test_revoke_one_own_session(
    settings: Settings, runtime: Runtime, anon: httpx.AsyncClient
) -> None:
    await _user(runtime)
    async with _app_client(settings, runtime, "10.0.0.3") as other:
        await login(other, ADA, ADA_PASSWORD)
        await login(anon, ADA, ADA_PASSWORD)
        target = next(
            s for s in (await anon.get("/api/auth/sessions")).json() if s["address"] == "10.0.0.3"
        )
        assert (await anon.delete(f"/api/auth/sessions/{target['id']}")).status_code == 204
        assert (await other.get("/api/auth/me")).status_code == 401
        assert (await anon.get("/api/auth/me")).status_code == 200
        again = await anon.delete(f"/api/auth/sessions/{target['id']}")
        assert again.status_code == 404


async def test_deactivate_ends_sessions_and_tokens_and_reactivate(
    settings: Settings, runtime: Runtime, anon: httpx.AsyncClient
) -> None:
    user = await _user(runtime)
    async with runtime.sessionmaker() as session, session.begin():
        await accounts.create_user(session, ADMIN_EMAIL, ADMIN_PASSWORD, role="admin")
        _, token = await api_tokens.create_token(session, user.id, "ci")
    await login(anon, ADA, ADA_PASSWORD)
    bearer = {"Authorization": f"Bearer {token}"}
    assert (await anon.get("/api/auth/me", headers=bearer)).status_code == 200
    async with runtime.sessionmaker() as session, session.begin():
        await accounts.set_active(session, user.id, False)
    assert (await anon.get("/api/auth/me")).status_code == 401
    assert (await anon.get("/api/auth/me", headers=bearer)).status_code == 401
    async with runtime.sessionmaker() as session:
        assert await login_sessions.list_sessions(session, user.id) == []
    async with runtime.sessionmaker() as session, session.begin():
        await accounts.set_active(session, user.id, True)
    assert (await anon.get("/api/auth/me", headers=bearer)).status_code == 200
    await login(anon, ADA, ADA_PASSWORD)
    actions = [a for a, o, _ in await _actions(runtime) if o == str(user.id)]
    assert "user.deactivate" in actions and "user.reactivate" in actions


async def test_last_active_admin_cannot_be_demoted_or_deactivated(runtime: Runtime) -> None:
    async with runtime.sessionmaker() as session, session.begin():
        admin = await accounts.create_user(session, ADMIN_EMAIL, ADMIN_PASSWORD, role="admin")
    async with runtime.sessionmaker() as session, session.begin():
        with pytest.raises(accounts.AccountError, match="last active admin") as refused:
            await accounts.set_role(session, admin.id, "viewer")
        assert refused.value.status == 409
        with pytest.raises(accounts.AccountError, match="last active admin"):
            await accounts.set_active(session, admin.id, False)
        second = await accounts.create_user(session, "root@example.com", None, role="admin")
        await accounts.set_role(session, admin.id, "viewer")
        assert second.role == "admin"


async def test_admin_reset_link_is_one_time_and_ends_the_old_password(
    runtime: Runtime, anon: httpx.AsyncClient
) -> None:
    user = await _user(runtime)
    await login(anon, ADA, ADA_PASSWORD)
    async with runtime.sessionmaker() as session, session.begin():
        token, expires_at = await password_links.issue(session, user.id, hours=24)
    assert timedelta(hours=23) < expires_at - datetime.now(UTC) <= timedelta(hours=24)
    assert (await anon.get("/api/auth/me")).status_code == 401  # sessions ended
    assert (await _try(anon, ADA, ADA_PASSWORD)).status_code == 401  # old password gone
    async with runtime.sessionmaker() as session, session.begin():
        with pytest.raises(WeakPassword, match="common"):
            await password_links.redeem(session, token, "Password123456")
    async with runtime.sessionmaker() as session, session.begin():
        await password_links.redeem(session, token, "new lantern by the sea")
    async with runtime.sessionmaker() as session, session.begin():
        with pytest.raises(password_links.InvalidLink):
            await password_links.redeem(session, token, "another lantern by the sea")
    await login(anon, ADA, "new lantern by the sea")
    stages = [d["stage"] for a, _, d in await _actions(runtime) if a == "user.password_reset"]
    assert stages == ["issued", "completed"]


async def test_expired_or_superseded_link_is_refused(runtime: Runtime) -> None:
    user = await _user(runtime)
    async with runtime.sessionmaker() as session, session.begin():
        old, _ = await password_links.issue(session, user.id, hours=1)
        new, _ = await password_links.issue(session, user.id, hours=-1)
    async with runtime.sessionmaker() as session, session.begin():
        for token in (old, new):
            with pytest.raises(password_links.InvalidLink):
                await password_links.user_for_link(session, token)


async def test_create_user_checks_policy_email_role_and_duplicates(runtime: Runtime) -> None:
    async with runtime.sessionmaker() as session, session.begin():
        with pytest.raises(WeakPassword):
            await accounts.create_user(session, ADA, "short")
        with pytest.raises(accounts.AccountError, match="valid email") as bad:
            await accounts.create_user(session, "not an email", ADA_PASSWORD)
        assert bad.value.field == "email"
        with pytest.raises(accounts.AccountError, match="role"):
            await accounts.create_user(session, ADA, ADA_PASSWORD, role="owner")
        await accounts.create_user(session, "Ada@Example.com ", ADA_PASSWORD)
        with pytest.raises(accounts.AccountError, match="exists") as dup:
            await accounts.create_user(session, ADA, ADA_PASSWORD)
        assert dup.value.status == 409
