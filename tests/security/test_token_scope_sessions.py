"""Finding 4: a token below the admin scope cannot end its owner's browser sessions.

The full table (every session and account route x every scope) is in
``tests/integration/test_authorization_matrix.py::test_token_scopes_on_session_and_account_routes``.
"""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.integration


async def test_read_token_cannot_end_sessions(client: httpx.AsyncClient) -> None:
    made = await client.post("/api/tokens", json={"name": "r", "scopes": ["read"]})
    session_id = (await client.get("/api/auth/sessions")).json()[0]["id"]
    async with httpx.AsyncClient(
        transport=client._transport,
        base_url="http://testserver.local",
        headers={"Authorization": f"Bearer {made.json()['token']}"},
    ) as token:
        assert (await token.get("/api/auth/sessions")).status_code == 200  # reading is fine
        assert (await token.post("/api/auth/sign-out-everywhere")).status_code == 403
        assert (await token.delete(f"/api/auth/sessions/{session_id}")).status_code == 403
        assert (await token.post(f"/account/sessions/{session_id}/revoke")).status_code == 403
        assert (await token.post("/account/sign-out-everywhere")).status_code == 403
        assert (await token.post("/api/auth/logout")).status_code == 403
    assert (await client.get("/api/auth/me")).status_code == 200


async def test_admin_token_ends_sessions_but_not_by_its_cookie(client: httpx.AsyncClient) -> None:
    """An admin-scope token may sign its owner out everywhere; its logout ends nothing
    (a token is not a session, and a cookie sent with it is not what authenticates)."""
    made = await client.post("/api/tokens", json={"name": "a", "scopes": ["admin"]})
    bearer = {"Authorization": f"Bearer {made.json()['token']}"}
    r = await client.post("/api/auth/logout", headers=bearer)  # the session cookie rides along
    assert r.status_code == 204
    assert (await client.get("/api/auth/me")).status_code == 200
    r = await client.post("/api/auth/sign-out-everywhere", headers=bearer)
    assert r.status_code == 200 and r.json() == {"sessions_ended": 1}
    assert (await client.get("/api/auth/me", headers={})).status_code == 401
