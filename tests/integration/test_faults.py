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
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.embedded import EmbeddedRedis
from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import attempt_rows, publish
from tests.integration.railyard_processes import (
    api,
    http_flow,
    own_postgres,
    own_settings,
    processes,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]


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
                    assert r.json()["status"] == 503
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
