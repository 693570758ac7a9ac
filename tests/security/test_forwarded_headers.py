"""Finding 6: ``X-Forwarded-For`` is believed only from ``RAILYARD_TRUSTED_PROXIES``.

uvicorn's own default trusts forwarded headers from loopback, so a client on the API's
host (or anything a proxy on it relays without rewriting the header) could pick its own
address: the per-address sign-in throttle counted a new address per attempt and the audit
log recorded forged ones. The API is served here the way ``railyard api`` serves it
(:func:`backend.cli.uvicorn_config`) on a real socket, and a failed sign-in's audit row
shows which address the API believed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest
import uvicorn
from sqlalchemy import select

from backend.app import create_app
from backend.cli import uvicorn_config
from backend.db.models import AuditLog
from backend.runtime import Runtime
from backend.settings import Settings, SettingsError, load_settings

pytestmark = pytest.mark.integration

FORGED = "203.0.113.7"


@contextlib.asynccontextmanager
async def serving(settings: Settings, runtime: Runtime) -> AsyncIterator[str]:
    """The app under uvicorn on an ephemeral loopback port; yields its base URL."""
    server = uvicorn.Server(uvicorn_config(create_app(settings, runtime), settings, "127.0.0.1", 0))
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(1000):  # at most 10 s
            if server.started:
                break
            await asyncio.sleep(0.01)
        assert server.started, "uvicorn did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def _address_seen(settings: Settings, runtime: Runtime, email: str) -> str | None:
    """Sign in with a wrong password sending a forged ``X-Forwarded-For``; the address of
    the audit row the failure left."""
    async with serving(settings, runtime) as url, httpx.AsyncClient(base_url=url) as c:
        await c.get("/login")
        r = await c.post(
            "/api/auth/login",
            json={"email": email, "password": "not the password at all"},
            headers={"X-CSRFToken": c.cookies["csrftoken"], "X-Forwarded-For": FORGED},
        )
        assert r.status_code == 401, r.text
    async with runtime.sessionmaker() as session:
        rows = await session.execute(
            select(AuditLog.address).where(
                AuditLog.action == "auth.login_failed", AuditLog.object_id == email
            )
        )
        return rows.scalar_one()


async def test_forwarded_for_ignored_without_trusted_proxies(
    settings: Settings, runtime: Runtime
) -> None:
    assert settings.trusted_proxies == ()
    assert await _address_seen(settings, runtime, "a@example.com") == "127.0.0.1"
    other = msgspec.structs.replace(settings, trusted_proxies=("10.0.0.0/8",))
    assert await _address_seen(other, runtime, "b@example.com") == "127.0.0.1"


async def test_forwarded_for_believed_from_a_trusted_proxy(
    settings: Settings, runtime: Runtime
) -> None:
    trusting = msgspec.structs.replace(settings, trusted_proxies=("127.0.0.0/8",))
    assert await _address_seen(trusting, runtime, "c@example.com") == FORGED


def test_trusted_proxies_setting_is_validated() -> None:
    env = {"RAILYARD_TRUSTED_PROXIES": "10.1.2.3, 10.42.0.0/16, fd00::/8"}
    assert load_settings(env).trusted_proxies == ("10.1.2.3", "10.42.0.0/16", "fd00::/8")
    with pytest.raises(SettingsError, match="RAILYARD_TRUSTED_PROXIES"):
        load_settings({"RAILYARD_TRUSTED_PROXIES": "ingress.example.com"})
