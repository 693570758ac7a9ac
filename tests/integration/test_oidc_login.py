"""OpenID Connect single sign-on end to end against a local authlib OIDC provider:
discovery, PKCE, nonce, JWKS, account creation and linking by (issuer, subject), role and
group claims; and every refused id_token (wrong nonce, audience, issuer, expired, bad
signature) signs nobody in."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import pytest_asyncio
from msgspec import structs
from sqlalchemy import select

from backend.app import create_app
from backend.db.models import AuditLog, User, UserIdentity
from backend.runtime import Runtime
from backend.services.identity import accounts
from backend.settings import Settings
from tests.fakes.oauth2_provider import OAuth2Provider

pytestmark = pytest.mark.integration

CALLBACK = "http://testserver.local/login/oidc/callback"
SECRET = "oidc-client-secret-0123456789"


@pytest.fixture
def idp() -> Iterator[OAuth2Provider]:
    provider = OAuth2Provider().start()
    provider.add_client("railyard", SECRET, CALLBACK, scope="openid email profile groups")
    provider.state.claims.update(
        {"railyard_roles": ["rail-devs"], "groups": ["engineering", "on-call"]}
    )
    yield provider
    provider.stop()


@pytest_asyncio.fixture
async def browser(
    settings: Settings, runtime: Runtime, idp: OAuth2Provider, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    """An anonymous client of an app with single sign-on through ``idp``."""
    sso = structs.replace(
        settings,
        oidc_issuer=idp.url,
        oidc_client_id="railyard",
        oidc_client_secret=SECRET,
        oidc_scopes="openid email profile groups",
        oidc_provider_name="Fake IdP",
        oidc_role_claim="railyard_roles",
        oidc_role_map={"rail-admins": "admin", "rail-devs": "editor"},
        oidc_default_role="viewer",
        oidc_groups_claim="groups",
    )
    monkeypatch.setattr(runtime, "settings", sso)
    transport = httpx.ASGITransport(app=create_app(sso, runtime), client=("10.1.1.1", 4000))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
        yield c


async def _sso(browser: httpx.AsyncClient, next_path: str = "/runs") -> httpx.Response:
    """Click "Sign in with ...", let the provider answer, follow back to the callback."""
    start = await browser.get(f"/login/oidc?next={next_path}")
    assert start.status_code in (302, 303), start.text
    authorize = start.headers["location"]
    async with httpx.AsyncClient() as outside:
        consent = await outside.get(authorize)
    assert consent.status_code == 302, consent.text
    back = consent.headers["location"]
    assert back.startswith(CALLBACK + "?")
    return await browser.get(back.replace("http://testserver.local", ""))


async def _audit(runtime: Runtime, action: str) -> list[AuditLog]:
    async with runtime.sessionmaker() as session:
        query = select(AuditLog).where(AuditLog.action == action).order_by(AuditLog.id)
        return list((await session.execute(query)).scalars())


async def test_login_page_offers_the_provider(browser: httpx.AsyncClient) -> None:
    page = await browser.get("/login?next=/runs")
    assert page.status_code == 200
    assert "Sign in with Fake IdP" in page.text and 'href="/login/oidc?next=/runs"' in page.text


async def test_authorization_request_uses_pkce_state_and_nonce(
    browser: httpx.AsyncClient, idp: OAuth2Provider
) -> None:
    start = await browser.get("/login/oidc")
    query = parse_qs(urlsplit(start.headers["location"]).query)
    assert start.headers["location"].startswith(idp.url + "/authorize?")
    assert query["response_type"] == ["code"] and query["client_id"] == ["railyard"]
    assert query["redirect_uri"] == [CALLBACK]
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert "openid" in query["scope"][0].split()
    assert len(query["state"][0]) >= 32 and len(query["nonce"][0]) >= 32


async def test_first_login_creates_the_user_with_mapped_role_and_groups(
    browser: httpx.AsyncClient, runtime: Runtime, idp: OAuth2Provider
) -> None:
    done = await _sso(browser)
    assert done.status_code in (302, 303), done.text
    assert done.headers["location"] == "/runs"
    me = (await browser.get("/api/auth/me")).json()
    assert me["email"] == "ada@example.com" and me["role"] == "editor"
    assert me["display_name"] == "Ada Lovelace"
    async with runtime.sessionmaker() as session:
        user = (await session.execute(select(User))).scalar_one()
        assert user.password_hash is None and user.external_groups == ["engineering", "on-call"]
        link = (await session.execute(select(UserIdentity))).scalar_one()
        assert (link.issuer, link.subject, link.user_id) == (idp.url, "ada-0001", user.id)
    [login] = await _audit(runtime, "auth.login")
    assert login.details["method"] == "oidc" and login.address == "10.1.1.1"
    sessions = (await browser.get("/api/auth/sessions")).json()
    assert [s["method"] for s in sessions] == ["oidc"]

    # the next sign-in finds the account by (issuer, subject), even with a new email,
    # and follows the claims: role re-derived, groups replaced
    await browser.post("/api/auth/logout", headers={"x-csrftoken": browser.cookies["csrftoken"]})
    idp.state.claims.update(
        {"email": "ada.l@example.com", "railyard_roles": ["rail-admins"], "groups": ["ops"]}
    )
    assert (await _sso(browser)).status_code in (302, 303)
    me = (await browser.get("/api/auth/me")).json()
    assert me["id"] == str(user.id) and me["role"] == "admin"
    async with runtime.sessionmaker() as session:
        again = await session.get(User, user.id)
        assert again is not None and again.external_groups == ["ops"]
    [change] = await _audit(runtime, "user.role_change")
    assert change.before["role"] == "editor" and change.after["role"] == "admin"


async def test_unmapped_claim_gives_the_default_role(
    browser: httpx.AsyncClient, idp: OAuth2Provider
) -> None:
    idp.state.claims["railyard_roles"] = ["something-else"]
    assert (await _sso(browser)).status_code in (302, 303)
    assert (await browser.get("/api/auth/me")).json()["role"] == "viewer"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"nonce": "not-the-nonce-that-was-sent"}, "nonce"),
        ({"aud": ["someone-else"]}, "aud"),
        ({"iss": "http://evil.example"}, "iss"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "expired"),
    ],
)
async def test_refused_id_tokens_sign_nobody_in(
    browser: httpx.AsyncClient,
    runtime: Runtime,
    idp: OAuth2Provider,
    changes: dict[str, Any],
    why: str,
) -> None:
    idp.state.id_token_changes = changes
    refused = await _sso(browser)
    assert refused.status_code == 401, refused.text
    assert "Single sign-on failed: the id_token was refused" in refused.text
    assert why in refused.text.lower()
    assert "railyard_session" not in browser.cookies
    assert (await browser.get("/api/auth/me")).status_code == 401
    async with runtime.sessionmaker() as session:
        assert (await session.execute(select(User))).first() is None
    [failed] = await _audit(runtime, "auth.login_failed")
    assert failed.details["method"] == "oidc"


async def test_id_token_signed_with_an_unknown_key_is_refused(
    browser: httpx.AsyncClient, idp: OAuth2Provider
) -> None:
    idp.state.sign_with_unknown_key = True
    before = idp.state.jwks_requests
    refused = await _sso(browser)
    assert refused.status_code == 401 and "signature is not valid" in refused.text
    assert idp.state.jwks_requests > before  # the JWKS was fetched again (key rotation)
    assert (await browser.get("/api/auth/me")).status_code == 401


async def test_state_is_single_use(browser: httpx.AsyncClient) -> None:
    start = await browser.get("/login/oidc")
    async with httpx.AsyncClient() as outside:
        back = (await outside.get(start.headers["location"])).headers["location"]
    path = back.replace("http://testserver.local", "")
    assert (await browser.get(path)).status_code in (302, 303)
    replay = await browser.get(path)
    assert replay.status_code == 400 and "expired or was already used" in replay.text
    forged = await browser.get("/login/oidc/callback?state=forged&code=x")
    assert forged.status_code == 400


async def test_existing_local_account_links_only_with_a_verified_email(
    browser: httpx.AsyncClient, runtime: Runtime, idp: OAuth2Provider
) -> None:
    async with runtime.sessionmaker() as session, session.begin():
        local = await accounts.create_user(
            session, "ada@example.com", "orchid window passphrase", role="operator"
        )
    idp.state.claims["email_verified"] = False
    refused = await _sso(browser)
    assert refused.status_code == 403 and "did not verify the email" in refused.text
    idp.state.claims["email_verified"] = True
    assert (await _sso(browser)).status_code in (302, 303)
    me = (await browser.get("/api/auth/me")).json()
    assert me["id"] == str(local.id) and me["role"] == "editor"  # the claim decides


async def test_deactivated_account_cannot_sign_in_by_sso(
    browser: httpx.AsyncClient, runtime: Runtime
) -> None:
    assert (await _sso(browser)).status_code in (302, 303)
    async with runtime.sessionmaker() as session, session.begin():
        user = (await session.execute(select(User))).scalar_one()
        await accounts.create_user(session, "boss@example.com", None, role="admin")
        await accounts.set_active(session, user.id, False)
    assert (await browser.get("/api/auth/me")).status_code == 401
    refused = await _sso(browser)
    assert refused.status_code == 403 and "deactivated" in refused.text


async def test_provider_errors_and_misconfiguration_are_explained(
    browser: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    denied = await browser.get("/login/oidc/callback?error=access_denied&state=s")
    assert denied.status_code == 400 and "access_denied" in denied.text
    broken = structs.replace(runtime.settings, oidc_issuer="http://127.0.0.1:9/nothing")
    monkeypatch.setattr(runtime, "settings", broken)
    down = await browser.get("/login/oidc")
    assert down.status_code == 502 and "could not be read" in down.text


async def test_claimed_groups_reach_railyard_groups_of_the_same_name(
    browser: httpx.AsyncClient, client: httpx.AsyncClient, runtime: Runtime, idp: OAuth2Provider
) -> None:
    """A grant to the Railyard group "engineering" reaches a single sign-on user whose
    provider claims "engineering"; when the provider stops claiming it, access ends."""
    group = (await client.post("/api/admin/groups", json={"name": "engineering"})).json()["id"]
    wf = (await client.post("/api/workflows", json={"name": "Team flow"})).json()["id"]
    r = await client.post(
        f"/api/workflows/{wf}/grants", json={"subject": f"group:{group}", "level": "read"}
    )
    assert r.status_code in (200, 201), r.text
    idp.state.claims.update({"railyard_roles": ["viewer"], "groups": ["engineering"]})
    assert (await _sso(browser)).status_code in (302, 303)
    assert (await browser.get(f"/api/workflows/{wf}")).status_code == 200
    listed = [w["id"] for w in (await browser.get("/api/workflows")).json()]
    assert listed == [wf]

    await browser.post("/api/auth/logout", headers={"x-csrftoken": browser.cookies["csrftoken"]})
    idp.state.claims.update({"groups": ["marketing"]})
    assert (await _sso(browser)).status_code in (302, 303)
    assert (await browser.get(f"/api/workflows/{wf}")).status_code == 404
