"""Finding 11: while PostgreSQL shuts down, webhook deliveries answer 503 with
``Retry-After``, never 500.

A pooled connection that PostgreSQL's shutdown had just ended (its ``FATAL`` 57P01 read,
its closed socket not yet noticed) refused the next statement with asyncpg's
``InternalClientError`` ("cannot switch to state 12; another operation (2) is in
progress"), raised by the group commit's run insert: a 500. Now the fast path drops such
a connection and sends the statement (never sent) on another, the error counts as the
database being unavailable wherever else it surfaces (503 with ``Retry-After``), a
session-ending PostgreSQL error never puts its connection back, and the group commit no
longer retries a group item by item on a dying server.
"""

from __future__ import annotations

import asyncio
import io
import traceback
from pathlib import Path

import asyncpg
import pytest

from backend.db.engine import make_engine
from backend.db.fast_path import FastPath
from backend.db.group_commit import refused_by_postgres
from backend.embedded import EmbeddedRedis
from backend.services.availability import database_unavailable
from backend.settings import Settings
from tests.http_sink import HttpSink
from tests.integration.flows import publish
from tests.integration.railyard_processes import api, http_flow, own_postgres, own_settings, until

pytestmark = pytest.mark.integration

ANSWER_WITHIN = 120.0
"""Seconds a webhook delivery may take to be answered while PostgreSQL restarts (most
answers take milliseconds; the worst legitimate wait is the pool's 30 s checkout timeout
followed by asyncpg's 60 s connection timeout)."""


def awaited_by_every_task() -> str:
    """The stack of every task of the running loop (what a hung request waits on)."""
    out = io.StringIO()
    for task in asyncio.all_tasks():
        task.print_stack(limit=30, file=out)
    return out.getvalue()


async def test_a_busy_pooled_connection_is_replaced_before_the_statement_is_sent(
    settings: Settings,
) -> None:
    """A connection back in the pool while its protocol is still busy (as one is between
    the server's FATAL and its socket being seen closed): asyncpg refuses to start the
    next statement on it before sending anything; the fast path drops it and sends the
    statement on a fresh connection."""
    engine = make_engine(settings.database_url, pool_size=1)
    fast = FastPath(engine)
    busy: asyncio.Task[object] | None = None
    try:
        assert await fast.fetchrow("select 1") is not None  # the pool holds one connection
        fairy = engine.sync_engine.pool.connect()
        busy = asyncio.create_task(fairy.driver_connection.fetchrow("select pg_sleep(5)"))
        await asyncio.sleep(0.05)  # the query is on the wire
        fairy.close()  # back in the pool, protocol busy
        row = await fast.fetchrow("select 2")
        assert row is not None and row[0] == 2
    finally:
        if busy is not None:
            busy.cancel()
            await asyncio.gather(busy, return_exceptions=True)
        await engine.dispose()


def test_a_refused_start_on_a_stale_connection_means_the_database_is_unavailable() -> None:
    stale = asyncpg.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    )
    assert database_unavailable(stale)
    assert database_unavailable(
        asyncpg.InterfaceError("cannot perform operation: another operation is in progress")
    )
    assert not database_unavailable(asyncpg.InternalClientError("unknown error in protocol"))


def test_a_session_ending_error_is_not_a_refusal_of_the_group() -> None:
    shutdown = asyncpg.exceptions.AdminShutdownError("terminating connection")
    assert not refused_by_postgres(shutdown)
    assert refused_by_postgres(asyncpg.exceptions.UniqueViolationError("duplicate key"))


@pytest.mark.faults
async def test_webhooks_during_postgres_restarts_answer_503_never_500(
    sink: HttpSink, embedded_tmp_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Eight clients post to a webhook while PostgreSQL stops and starts three times:
    every answer is 202 or 503 with ``Retry-After`` (before the fix, 1 or 2 of ~1,200
    answers were 500 in two of three runs)."""
    pg = await own_postgres(embedded_tmp_dir)
    redis = EmbeddedRedis(embedded_tmp_dir / "redis", persistence_off=True)
    redis.start()
    answers: list[tuple[int, str | None, str]] = []
    try:
        settings = own_settings(pg.url, redis.url)
        async with api(settings) as (_, client):
            wf = await publish(client, http_flow(sink.url))
            stop = asyncio.Event()

            async def poster() -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    post = client.post(wf["webhook_path"], json={"order": n})
                    try:
                        r = await asyncio.wait_for(post, ANSWER_WITHIN)
                    except TimeoutError:  # a hang fails the test, naming what it awaits
                        answers.append((0, None, awaited_by_every_task()))
                        return
                    answers.append((r.status_code, r.headers.get("retry-after"), r.text))

            async def ready() -> bool:
                return (await client.get("/health/ready")).status_code == 200

            posters = [asyncio.create_task(poster()) for _ in range(8)]
            try:
                for _ in range(3):
                    await asyncio.sleep(0.5)
                    await asyncio.to_thread(pg.stop)
                    await asyncio.sleep(0.5)
                    await asyncio.to_thread(pg.start)
                    await until(ready, 30, "the API to see the database again")
            finally:
                stop.set()
                await asyncio.gather(*posters)
    finally:
        redis.stop()
        pg.stop()
    odd = [a for a in answers if a[0] not in (202, 503)]
    traces = [
        "".join(traceback.format_exception(*r.exc_info))[-2500:]
        for r in caplog.records
        if r.exc_info and r.exc_info[1] is not None
    ]
    assert odd == [], (odd[:5], traces[:2])
    assert {a[1] for a in answers if a[0] == 503} == {"5"}
    assert any(a[0] == 503 for a in answers) and answers[-1][0] == 202
