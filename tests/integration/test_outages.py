"""Outages of Redis and PostgreSQL with real processes: ``railyard worker`` and
``railyard scheduler`` run as subprocesses (tests/integration/test_faults.py's harness)
against a Redis / PostgreSQL of the test's own, which is killed and started again.

Each test checks that the same worker process is alive afterwards (nobody restarted
it), that its readiness probe said 503 during the outage and 200 after, and that every
run acknowledged before, during or after the outage completed exactly once.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from backend.embedded import EmbeddedRedis
from backend.runtime import Runtime
from backend.settings import Settings
from tests.http_sink import HttpSink
from tests.integration.flows import publish
from tests.integration.railyard_processes import (
    all_succeed,
    api,
    http_flow,
    kill_redis,
    own_postgres,
    own_settings,
    processes,
    start_runs,
    until,
    until_probe,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_worker_redis_outage(
    migrated_url: str, runtime: Runtime, sink: HttpSink, embedded_tmp_dir: Path
) -> None:
    redis = EmbeddedRedis(embedded_tmp_dir / "redis-0", persistence_off=True)
    redis.start()
    port = redis.port
    health = free_port()
    try:
        settings = own_settings(migrated_url, redis.url)
        sink.delay = 0.2
        async with api(settings) as (rt, client):
            wf = await publish(client, http_flow(sink.url))
            with processes(settings, embedded_tmp_dir) as start:
                start("scheduler")
                worker = start("worker", "worker", "--health-port", str(health))
                await until_probe(health, 200, logs=embedded_tmp_dir)

                # an idle worker, Redis killed for 3 s
                kill_redis(redis)
                await until_probe(health, 503, down="redis", logs=embedded_tmp_dir)
                await asyncio.sleep(3)
                redis = EmbeddedRedis(embedded_tmp_dir / "redis-1", port, persistence_off=True)
                redis.start()
                await until_probe(health, 200, logs=embedded_tmp_dir)
                first = await start_runs(client, wf["webhook_path"], 0, 1)
                await all_succeed(rt, first, timeout=30)

                # 30 runs in flight, Redis down for 30 s and back empty
                before = await start_runs(client, wf["webhook_path"], 1, 30)

                async def in_flight() -> bool:
                    return len(sink.requests) >= 3

                await until(in_flight, 30, "runs to be in flight")
                kill_redis(redis)
                during = await start_runs(client, wf["webhook_path"], 31, 5)
                await until_probe(health, 503, down="redis", logs=embedded_tmp_dir)
                await asyncio.sleep(30)
                redis = EmbeddedRedis(embedded_tmp_dir / "redis-2", port, persistence_off=True)
                redis.start()
                after = await start_runs(client, wf["webhook_path"], 36, 5)
                await all_succeed(rt, before + during + after, timeout=90)
                await until_probe(health, 200, logs=embedded_tmp_dir)
                assert worker.poll() is None, "the worker exited"
    finally:
        redis.stop()


async def test_worker_postgres_outage(sink: HttpSink, embedded_tmp_dir: Path) -> None:
    pg = await own_postgres(embedded_tmp_dir)
    redis = EmbeddedRedis(embedded_tmp_dir / "redis", persistence_off=True)
    redis.start()
    health = free_port()
    try:
        settings: Settings = own_settings(pg.url, redis.url)
        sink.delay = 0.2
        async with api(settings) as (rt, client):
            wf = await publish(client, http_flow(sink.url))
            with processes(settings, embedded_tmp_dir) as start:
                scheduler = start("scheduler")
                worker = start("worker", "worker", "--health-port", str(health))
                await until_probe(health, 200, logs=embedded_tmp_dir)
                runs = await start_runs(client, wf["webhook_path"], 0, 20)

                async def in_flight() -> bool:
                    return len(sink.requests) >= 3

                await until(in_flight, 30, "runs to be in flight")
                await asyncio.to_thread(pg.stop)
                await until_probe(health, 503, down="database", logs=embedded_tmp_dir)
                await asyncio.sleep(10)
                await asyncio.to_thread(pg.start)
                await until_probe(health, 200, logs=embedded_tmp_dir)
                await all_succeed(rt, runs, timeout=90)
                late = await start_runs(client, wf["webhook_path"], 20, 3)
                await all_succeed(rt, late, timeout=30)
                assert worker.poll() is None, "the worker exited"
                assert scheduler.poll() is None, "the scheduler exited"
    finally:
        redis.stop()
        pg.stop()


async def test_api_during_postgres_restart_answers_503_never_500(
    sink: HttpSink, embedded_tmp_dir: Path
) -> None:
    """Requests keep coming while PostgreSQL shuts down, is down, and starts up: each
    answers 2xx or 503 with ``Retry-After`` (an HTML page for browser pages), never 500."""
    pg = await own_postgres(embedded_tmp_dir)
    redis = EmbeddedRedis(embedded_tmp_dir / "redis", persistence_off=True)
    redis.start()
    try:
        settings = own_settings(pg.url, redis.url)
        async with api(settings) as (_, client):
            wf = await publish(client, http_flow(sink.url))
            html = {"accept": "text/html"}
            requests: list[tuple[str, str, dict[str, str], Any]] = [
                ("GET", f"/api/workflows/{wf['id']}", {}, None),
                ("GET", "/api/runs", {}, None),
                ("POST", wf["webhook_path"], {}, {"order": 1}),
                ("GET", "/runs", html, None),
                ("GET", f"/workflows/{wf['id']}/designer", html, None),
            ]
            answers: list[tuple[str, int, str, str | None]] = []
            restarted = asyncio.Event()

            async def keep_asking() -> None:
                while not restarted.is_set():
                    for method, url, headers, body in requests:
                        r = await client.request(method, url, headers=headers, json=body)
                        kind = r.headers.get("content-type", "").split(";")[0]
                        answers.append((url, r.status_code, kind, r.headers.get("retry-after")))
                    await asyncio.sleep(0.02)

            asker = asyncio.create_task(keep_asking())
            await asyncio.sleep(0.3)
            await asyncio.to_thread(pg.stop)
            await asyncio.sleep(1.0)
            await asyncio.to_thread(pg.start)

            async def ready() -> bool:
                return (await client.get("/health/ready")).status_code == 200

            await until(ready, 30, "the API to see the database again")
            await asyncio.sleep(0.5)
            restarted.set()
            await asker
    finally:
        redis.stop()
        pg.stop()
    odd = [a for a in answers if a[1] not in (200, 202, 503)]
    assert not odd, odd
    unavailable = [a for a in answers if a[1] == 503]
    assert {url for url, *_ in unavailable} == {url for _, url, _, _ in requests}
    for url, _, kind, retry_after in unavailable:
        assert retry_after == "5", url
        assert kind == (
            "text/html" if not url.startswith(("/api/", "/hooks/")) else "application/problem+json"
        ), (url, kind)
    assert [a[1] for a in answers[-len(requests) :]] == [200, 200, 202, 200, 200]
