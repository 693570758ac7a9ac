"""The run store's fast path (backend/db/fast_path.py) keeps the pool's promises while it calls
the pool without greenlets: a PostgreSQL restart between two statements, a recycled
connection, overflow connections, an exhausted pool (the API answers 503, nothing is stored,
and the next request goes through), a constraint violation (the connection is kept) and a
cancelled statement (the connection is replaced), each leaving the pool's counts right and
no "never awaited" warning behind. Real PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from backend.db.engine import make_engine
from backend.db.fast_path import FastPath
from backend.db.run_store import PgRunStore
from backend.runtime import Runtime
from backend.services.availability import database_unavailable
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish
from tests.integration.railyard_processes import own_servers

pytestmark = pytest.mark.integration

PID = "SELECT pg_backend_pid()"
UNREACHED = "http://127.0.0.1:9/never-called"  # no worker runs the step


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The suite's settings with a short pool timeout (an exhausted pool fails fast)."""
    return msgspec.structs.replace(settings, db_pool_timeout=0.5)


@contextlib.contextmanager
def no_unawaited_coroutines() -> Iterator[None]:
    """Fail when a coroutine was dropped unawaited inside the block."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    dropped = [w for w in caught if "was never awaited" in str(w.message)]
    assert not dropped, dropped


@contextlib.asynccontextmanager
async def held(engine: AsyncEngine, count: int) -> AsyncIterator[list[PoolProxiedConnection]]:
    """``count`` connections of ``engine``'s pool checked out for the block."""
    conns = [await engine.raw_connection() for _ in range(count)]
    try:
        yield conns
    finally:
        for conn in conns:
            await greenlet_spawn(conn.close)


def idle_and_out(engine: AsyncEngine) -> tuple[int, int]:
    """(idle, checked out) connections of ``engine``'s pool."""
    pool: Any = engine.sync_engine.pool
    return pool.checkedin(), pool.checkedout()


async def test_fast_path_postgres_restart_between_two_statements(
    embedded_tmp_dir: Path,
) -> None:
    """The second statement after a restart succeeds at once: the checkout hook finds
    the closed socket, the synchronous checkout hands over to a greenlet to reconnect."""
    async with own_servers(embedded_tmp_dir) as (pg, settings):
        engine = make_engine(settings.database_url, pool_size=2)
        fast = FastPath(engine)
        try:
            before = (await fast.fetchrow(PID))[0]  # type: ignore[index]
            assert idle_and_out(engine) == (1, 0)
            await asyncio.to_thread(pg.stop)
            await asyncio.to_thread(pg.start)
            with no_unawaited_coroutines():
                after = (await fast.fetchrow(PID))[0]  # type: ignore[index]
            assert after != before
            assert idle_and_out(engine) == (1, 0)
        finally:
            await engine.dispose()


async def test_fast_path_replaces_a_recycled_connection(settings: Settings) -> None:
    """A connection due for replacement (soft-invalidated, as recycling marks it) is
    replaced on the fast path's checkout without a dropped coroutine."""
    engine = make_engine(settings.database_url, pool_size=1)
    fast = FastPath(engine)
    try:
        first = (await fast.fetchrow(PID))[0]  # type: ignore[index]
        raw = await engine.raw_connection()
        raw.invalidate(soft=True)
        await greenlet_spawn(raw.close)
        with no_unawaited_coroutines():
            second = (await fast.fetchrow(PID))[0]  # type: ignore[index]
        assert second != first
        assert (await fast.fetchrow(PID))[0] == second  # type: ignore[index]
        assert idle_and_out(engine) == (1, 0)
    finally:
        await engine.dispose()


async def test_fast_path_keeps_the_connection_after_a_constraint_violation(
    settings: Settings,
) -> None:
    """PostgreSQL's answer to a statement (a unique violation) leaves the connection in
    the pool; a cancelled statement's connection is replaced."""
    engine = make_engine(settings.database_url, pool_size=1)
    fast = FastPath(engine)
    try:
        pid = (await fast.fetchrow(PID))[0]  # type: ignore[index]
        with pytest.raises(asyncpg.UniqueViolationError):
            await fast.fetchrow(
                "INSERT INTO payloads (sha256, size_bytes, summary, preview, data) "
                "VALUES ($1, 1, '', '', ''), ($1, 1, '', '', '') RETURNING 1",
                "fast-path-duplicate",
            )
        assert (await fast.fetchrow(PID))[0] == pid  # type: ignore[index]
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await fast.fetchrow("SELECT pg_sleep(5)")
        assert idle_and_out(engine) == (1, 0)
        assert (await fast.fetchrow(PID))[0] != pid  # type: ignore[index]
    finally:
        await engine.dispose()


async def test_fast_path_overflow_connections_are_closed_on_return(settings: Settings) -> None:
    """Three concurrent statements on a pool of one: two run on overflow connections
    (opened in a greenlet), which are closed when they come back to a full pool."""
    engine = make_engine(settings.database_url, pool_size=1)
    fast = FastPath(engine)
    pool: Any = engine.sync_engine.pool
    try:
        await fast.fetchrow(PID)
        rows = await asyncio.gather(
            *(fast.fetchrow("SELECT pg_backend_pid(), pg_sleep(0.2)") for _ in range(3))
        )
        assert len({row[0] for row in rows}) == 3  # type: ignore[index]
        assert idle_and_out(engine) == (1, 0)
        assert pool.overflow() <= 0
    finally:
        await engine.dispose()


async def test_fast_path_exhausted_pool_raises_pool_timeout(settings: Settings) -> None:
    """Every connection in use: the statement waits the pool timeout and fails as
    PostgreSQL being unavailable; the pool serves again once connections come back."""
    engine = make_engine(settings.database_url, pool_size=1, pool_timeout=0.3)
    fast = FastPath(engine)
    try:
        async with held(engine, 1 + 20):
            with pytest.raises(sa_exc.TimeoutError) as raised:
                await fast.fetchrow(PID)
            assert database_unavailable(raised.value)
        assert await fast.fetchrow(PID) is not None
        assert idle_and_out(engine)[1] == 0
    finally:
        await engine.dispose()


async def test_fast_path_extends_only_the_current_lease(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """The lease extension on the fast path: True for the running attempt's token,
    False for a superseded one."""
    wf = await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("s0", "http.request", url=UNREACHED)],
            [edge("start", "s0")],
        ),
    )
    r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {}})
    run_id = uuid.UUID(r.json()["run_id"])
    await runtime.redis.flushall()  # no worker: the test claims the step itself
    claimed = await runtime.execution.steps.claim(run_id, "s0")
    assert claimed is not None
    store = runtime.execution.env.store
    assert isinstance(store, PgRunStore)
    until = datetime.now(UTC) + timedelta(minutes=5)
    assert await store.extend_lease(claimed.attempt_id, claimed.token, until)
    assert not await store.extend_lease(claimed.attempt_id, "not-the-token", until)
    async with runtime.engine.connect() as conn:
        stored = (
            await conn.execute(
                text("select lease_expires_at from attempts where id = :id"),
                {"id": claimed.attempt_id},
            )
        ).scalar_one()
    assert stored == until


async def test_fast_path_api_answers_503_when_the_pool_is_exhausted(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """A webhook whose run insert finds every pooled connection in use for the pool
    timeout is answered 503 with Retry-After, not 500; no run is stored, and the next
    request is accepted."""
    hook = node("hook", "trigger.webhook", respond="immediately")
    set_n = node("set_1", "control.set", mapping={"n": "=body.n"})
    wf = await publish(client, diagram([hook, set_n], [edge("hook", "set_1")]))
    first = await client.post(wf["webhook_path"], json={"n": 1})  # caches the endpoint
    assert first.status_code == 202, first.text
    pool: Any = runtime.engine.sync_engine.pool
    async with held(runtime.engine, pool.size() + 20 - pool.checkedout()):
        refused = await client.post(wf["webhook_path"], json={"n": 2})
    assert refused.status_code == 503, refused.text
    assert refused.headers.get("retry-after")
    again = await client.post(wf["webhook_path"], json={"n": 3})
    assert again.status_code == 202, again.text
    async with runtime.engine.connect() as conn:
        inputs = (await conn.execute(text("select input -> 'body' ->> 'n' from runs"))).scalars()
        assert sorted(inputs) == ["1", "3"]
