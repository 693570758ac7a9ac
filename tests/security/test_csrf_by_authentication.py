"""Finding 5: the CSRF check is decided by the authentication the request actually uses.

A request skips the CSRF check only when it authenticates by a bearer token, and then its
cookies authenticate nothing. ``Authorization: Bearer <not a token>`` sent with a session
cookie used to skip the check (the middleware looked at the header's prefix) and then act
as the cookie's user (the token parser found no token and fell back to the cookie).
"""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import func, select

from backend.db.models import Workflow
from backend.runtime import Runtime

pytestmark = pytest.mark.integration

# Header values that start like a bearer token but carry none (or a malformed one).
NOT_TOKENS = (b"Bearer \xa0", b"Bearer ", b"bearer", b"BEARER \t", b"Bearer a b", b"Bearer \x00")


async def _workflows(runtime: Runtime) -> int:
    async with runtime.sessionmaker() as session:
        return int((await session.execute(select(func.count()).select_from(Workflow))).scalar())


@pytest.mark.parametrize("value", NOT_TOKENS)
async def test_malformed_bearer_with_session_cookie_does_nothing(
    client: httpx.AsyncClient, runtime: Runtime, value: bytes
) -> None:
    """A cookie-authenticated browser session plus a bearer header without a usable token
    and without the CSRF header: anonymous (401), nothing created, the session untouched."""
    del client.headers["x-csrftoken"]
    before = await _workflows(runtime)
    r = await client.post(
        "/api/workflows", json={"name": "forged"}, headers={"Authorization": value}
    )
    assert r.status_code == 401, r.text
    r = await client.post("/api/auth/sign-out-everywhere", headers={"Authorization": value})
    assert r.status_code == 401, r.text
    r = await client.post("/logout", headers={"Authorization": value})  # a public route
    assert await _workflows(runtime) == before
    assert (await client.get("/api/auth/me")).status_code == 200  # still signed in


async def test_cookie_request_without_bearer_needs_the_csrf_header(
    client: httpx.AsyncClient,
) -> None:
    """Another scheme (or two Authorization headers) never skips the check."""
    del client.headers["x-csrftoken"]
    for headers in ([("Authorization", "Basic YTpi")], [], [("X-Other", "Bearer x")]):
        r = await client.post("/api/workflows", json={"name": "forged"}, headers=headers)
        assert r.status_code == 403, (headers, r.text)


async def test_two_authorization_headers_are_anonymous(client: httpx.AsyncClient) -> None:
    """A real token beside a second Authorization header authenticates nobody: the request
    is neither the token's nor the cookie's."""
    token = (await client.post("/api/tokens", json={"name": "t", "scopes": ["edit"]})).json()
    del client.headers["x-csrftoken"]
    headers = [("Authorization", f"Bearer {token['token']}"), ("Authorization", "Basic YTpi")]
    r = await client.post("/api/workflows", json={"name": "two"}, headers=headers)
    assert r.status_code == 401, r.text


async def test_a_well_formed_token_still_needs_no_csrf_header(client: httpx.AsyncClient) -> None:
    token = (await client.post("/api/tokens", json={"name": "t", "scopes": ["edit"]})).json()
    del client.headers["x-csrftoken"]
    headers = {"Authorization": f"Bearer {token['token']}"}
    r = await client.post("/api/workflows", json={"name": "by token"}, headers=headers)
    assert r.status_code == 201, r.text
