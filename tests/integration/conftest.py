"""Integration fixtures: migrated database, runtime, a real arq worker, a logged-in client.

The schema is created once per pytest process (Alembic migrations) and every table is
truncated before each test; Redis is flushed. The worker is a real arq worker consuming
the same Redis in the test's event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import text

from backend.app import create_app
from backend.db.migrate import upgrade
from backend.runtime import Runtime, build_runtime
from backend.services.identity import accounts
from backend.settings import Settings, load_settings
from backend.workers.worker import make_worker, stop_worker
from tests.http_sink import HttpSink

pytestmark = pytest.mark.integration

ADMIN_EMAIL = "admin@example.com"
ADMIN_PASSWORD = "amber signal lamp at dusk"
TEST_ENCRYPTION_KEY = "x/Xh3c3lW1jlcHnM3UYm8ZZpNfBCbZnVEDcoe3JEyh0="
TERMINAL = {"succeeded", "failed", "cancelled", "timed_out"}


@pytest.fixture(scope="session")
def migrated_url(pg_url: str) -> str:
    """The test database URL, migrated to the latest revision once per process."""
    upgrade(pg_url)
    return pg_url


@pytest.fixture(scope="session")
def settings(migrated_url: str, redis_url: str) -> Settings:
    """Settings pointing at the test servers; outbound HTTP may reach loopback."""
    return load_settings(
        environ={},
        database_url=migrated_url,
        redis_url=redis_url,
        base_url="http://testserver.local",
        http_allow_private=True,
        lease_seconds=10.0,
        sweep_interval=1.0,
        encryption_key=TEST_ENCRYPTION_KEY,
    )


@pytest_asyncio.fixture
async def runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """A runtime over clean tables and an empty Redis."""
    rt = await build_runtime(settings, pool_size=5)
    async with rt.engine.begin() as conn:
        tables = await conn.execute(
            text(
                "select tablename from pg_tables"
                " where schemaname = 'public' and tablename <> 'alembic_version'"
            )
        )
        names = ", ".join(f'"{t}"' for (t,) in tables)
        # the append-only audit log lets a TRUNCATE through only with this setting
        await conn.execute(
            text("select set_config('railyard.audit_purge_before', 'infinity', true)")
        )
        await conn.execute(text(f"truncate {names} cascade"))
    await rt.redis.flushall()
    try:
        yield rt
    finally:
        await rt.close()


@asynccontextmanager
async def running_worker(settings: Settings, **options: Any) -> AsyncIterator[Any]:
    """Run a real arq worker (with its own runtime) in the background while inside;
    ``options`` go to :func:`~backend.workers.worker.make_worker` (default: no sweeper)."""
    w = make_worker(settings, **{"sweep": False, **options})
    task = asyncio.create_task(w.async_run())
    try:
        yield w
    finally:
        await stop_worker(w)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture
async def worker(settings: Settings, runtime: Runtime) -> AsyncIterator[Any]:
    """A real arq worker consuming jobs in the background for the whole test."""
    async with running_worker(settings) as w:
        yield w


@pytest.fixture
def worker_factory(settings: Settings, runtime: Runtime) -> Any:
    """``async with worker_factory(**make_worker options): ...`` runs a worker only
    inside the block."""
    return lambda **options: running_worker(settings, **options)


@pytest_asyncio.fixture
async def client(settings: Settings, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the app, logged in as an admin, sending the CSRF header."""
    async with runtime.sessionmaker() as session, session.begin():
        await accounts.create_user(session, ADMIN_EMAIL, ADMIN_PASSWORD, role="admin")
    app = create_app(settings, runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
        await login(c)
        yield c


async def login(
    c: httpx.AsyncClient, email: str = ADMIN_EMAIL, password: str = ADMIN_PASSWORD
) -> None:
    """Fetch a CSRF cookie, log in through the API and keep the header for later calls."""
    await c.get("/login")
    token = c.cookies.get("csrftoken")
    assert token, "the login page must set the CSRF cookie"
    c.headers["x-csrftoken"] = token
    r = await c.post("/api/auth/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.text


async def wait_for_run(runtime: Runtime, run_id: str | uuid.UUID, timeout: float = 20.0) -> str:
    """Poll PostgreSQL until the run ends; returns its status. Fails after ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        async with runtime.engine.connect() as conn:
            status = (
                await conn.execute(
                    text("select status from runs where id = :id"), {"id": str(run_id)}
                )
            ).scalar_one()
        if status in TERMINAL:
            return str(status)
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish within {timeout} s (status {status})")


@pytest.fixture
def sink() -> Iterator[HttpSink]:
    """A local HTTP server recording requests (the third-party API of a test)."""
    s = HttpSink().start()
    yield s
    s.stop()
