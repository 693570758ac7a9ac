"""Fault tests with real processes: ``railyard worker`` and ``railyard scheduler`` run as
subprocesses (lease 3 s, sweep every 0.5 s) against real PostgreSQL and Redis.

(a) SIGKILL the worker in the middle of a step; (b) restart Redis with its data lost
mid-run; (c) stop PostgreSQL while the API serves. (b) and (c) use their own Redis /
PostgreSQL (``embedded_tmp_dir``) so the other tests of this pytest process are not
disturbed; each test runs alone in well under 60 s, so they run in parallel with the
rest of the suite (marker ``faults`` selects them).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.db.migrate import upgrade
from backend.embedded import EmbeddedPostgres, EmbeddedRedis
from backend.runtime import Runtime, build_runtime
from backend.services import accounts
from backend.settings import Settings, load_settings
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, login, wait_for_run
from tests.integration.test_run_control import attempt_rows
from tests.integration.test_runs import publish, sink
from tests.servers import pg_template

pytestmark = [pytest.mark.integration, pytest.mark.faults]
__all__ = ["sink"]

RAILYARD = str(Path(sys.executable).with_name("railyard"))
LEASE_SECONDS = 3


@contextmanager
def processes(settings: Settings, log_dir: Path) -> Iterator[Any]:
    """Yields ``start(kind, name=None, *args) -> Popen``: runs ``railyard <kind> <args>``
    (worker or scheduler) against ``settings``' servers, output in ``<log_dir>/<name>.log``;
    every process started is stopped (SIGTERM, then SIGKILL) on exit."""
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "RAILYARD_LEASE_SECONDS": str(LEASE_SECONDS),
        "RAILYARD_SWEEP_INTERVAL": "0.5",
        "RAILYARD_HTTP_ALLOW_PRIVATE": "true",
        "RAILYARD_BASE_URL": settings.base_url,
    }
    running: dict[str, subprocess.Popen[bytes]] = {}
    logs: list[Any] = []

    def start(kind: str, name: str | None = None, *args: str) -> subprocess.Popen[bytes]:
        name = name or kind
        log = (log_dir / f"{name}.log").open("wb")
        logs.append(log)
        proc = subprocess.Popen(
            [RAILYARD, kind, *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        running[name] = proc
        return proc

    try:
        yield start
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in running.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for log in logs:
            log.close()


def http_flow(url: str) -> dict[str, Any]:
    """webhook -> HTTP POST ``url`` (the slow third-party API) -> Set."""
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "http.request", method="POST", url=url, body="=body"),
            node("after", "control.set", mapping={"status": "=status"}),
        ],
        [edge("hook", "call"), edge("call", "after")],
    )


async def until(predicate: Any, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def attempts(runtime: Runtime, run_id: str) -> list[tuple[Any, ...]]:
    """``(number, status, error kind)`` of the ``call`` step's attempts."""
    return [row[1:] for row in await attempt_rows(runtime, run_id) if row[0] == "call"]


async def test_sigkilled_worker_mid_step_loses_nothing(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    sink: HttpSink,
    embedded_tmp_dir: Path,
) -> None:
    sink.delay = 2.0
    wf = await publish(client, http_flow(sink.url))
    with processes(settings, embedded_tmp_dir) as start:
        start("scheduler")
        first = start("worker", "worker-1")
        r = await client.post(wf["webhook_path"], json={"order": 1})
        assert r.status_code == 202, r.text
        run_id = r.json()["run_id"]

        async def calling() -> bool:
            return len(sink.requests) == 1

        await until(calling, 30, "the worker to call the endpoint")
        first.send_signal(signal.SIGKILL)  # in the middle of the step
        first.wait(5)
        start("worker", "worker-2")
        assert await wait_for_run(runtime, run_id, timeout=40) == "succeeded"
    rows = await attempts(runtime, run_id)
    assert rows == [(1, "expired", "lease_expired"), (2, "succeeded", None)]
    assert len(sink.requests) == 2  # at least once to the API ...
    assert {r.headers["idempotency-key"] for r in sink.requests} == {f"{run_id}:call"}


@asynccontextmanager
async def api(settings: Settings) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """A runtime and a logged-in client of the app for ``settings`` (own servers)."""
    rt = await build_runtime(settings, pool_size=3)
    try:
        async with rt.sessionmaker() as session, session.begin():
            await accounts.create_user(session, ADMIN_EMAIL, ADMIN_PASSWORD, role="admin")
        transport = httpx.ASGITransport(app=create_app(settings, rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
            await login(c)
            yield rt, c
    finally:
        await rt.close()


def own_settings(database_url: str, redis_url: str) -> Settings:
    return load_settings(
        environ={},
        database_url=database_url,
        redis_url=redis_url,
        base_url="http://testserver.local",
        http_allow_private=True,
        lease_seconds=float(LEASE_SECONDS),
        sweep_interval=0.5,
    )


async def own_postgres(directory: Path) -> EmbeddedPostgres:
    """A started, migrated PostgreSQL of the test's own under ``directory / "pg"``."""
    data = directory / "pg"
    shutil.copytree(pg_template(), data, symlinks=True, ignore=shutil.ignore_patterns(".railyard*"))
    pg = EmbeddedPostgres(data, fast=True)
    pg.start()
    await asyncio.to_thread(upgrade, pg.url)
    return pg


async def test_redis_restarted_with_its_data_lost_mid_run(
    migrated_url: str, runtime: Runtime, sink: HttpSink, embedded_tmp_dir: Path
) -> None:
    redis = EmbeddedRedis(embedded_tmp_dir / "redis", persistence_off=True)
    redis.start()
    port = redis.port
    try:
        settings = own_settings(migrated_url, redis.url)
        d = http_flow(sink.url)
        d["nodes"].insert(1, node("nap", "control.delay", seconds=1.5))
        d["edges"] = [edge("hook", "nap"), edge("nap", "call"), edge("call", "after")]
        async with api(settings) as (rt, client):
            wf = await publish(client, d)
            with processes(settings, embedded_tmp_dir) as start:
                start("scheduler")
                start("worker")
                r = await client.post(wf["webhook_path"], json={"order": 2})
                assert r.status_code == 202, r.text
                run_id = r.json()["run_id"]
                # the timer's deferred job lives in Redis: lose it
                redis.stop()
                redis = EmbeddedRedis(embedded_tmp_dir / "redis-2", port, persistence_off=True)
                redis.start()
                assert await wait_for_run(rt, run_id, timeout=40) == "succeeded"
        assert len(sink.requests) == 1
        assert await attempts(runtime, run_id) == [(1, "succeeded", None)]
    finally:
        redis.stop()


async def test_postgres_stopped_briefly_api_answers_503_and_nothing_is_lost(
    sink: HttpSink, embedded_tmp_dir: Path
) -> None:
    pg = await own_postgres(embedded_tmp_dir)
    redis = EmbeddedRedis(embedded_tmp_dir / "redis", persistence_off=True)
    redis.start()
    try:
        settings = own_settings(pg.url, redis.url)
        sink.delay = 1.5
        async with api(settings) as (rt, client):
            wf = await publish(client, http_flow(sink.url))
            with processes(settings, embedded_tmp_dir) as start:
                start("scheduler")
                start("worker")
                r = await client.post(wf["webhook_path"], json={"order": 3})
                assert r.status_code == 202, r.text
                run_id = r.json()["run_id"]

                async def calling() -> bool:
                    return len(sink.requests) == 1

                await until(calling, 30, "the worker to call the endpoint")
                await asyncio.to_thread(pg.stop)  # mid-step: the completion cannot be stored
                for method, url, body in [
                    ("GET", f"/api/workflows/{wf['id']}", None),
                    ("GET", f"/api/runs/{run_id}", None),
                    ("POST", wf["webhook_path"], {"order": 4}),
                ]:
                    r = await client.request(method, url, json=body)
                    assert r.status_code == 503, (url, r.status_code, r.text)
                    assert r.json()["status_code"] == 503
                    assert r.json()["detail"] == "database unavailable, try again shortly"
                r = await client.get("/health/ready")
                assert r.status_code == 503
                assert r.json()["database"].startswith("down") and r.json()["redis"] == "ok"
                await asyncio.sleep(1.0)
                await asyncio.to_thread(pg.start)

                async def ready() -> bool:
                    return (await client.get("/health/ready")).status_code == 200

                await until(ready, 20, "the API to see the database again")
                assert await wait_for_run(rt, run_id, timeout=40) == "succeeded"
                assert (await client.get(f"/api/runs/{run_id}")).json()["output"] == {"status": 200}
                rows = await attempts(rt, run_id)
        assert rows[-1][1] == "succeeded"
        assert [r[1] for r in rows].count("succeeded") == 1
    finally:
        redis.stop()
        pg.stop()
