"""Through a real Redis Sentinel: the runtime's client and arq find the primary by name.

``REDIS_URL`` points at a port nothing listens on, so every command below succeeds only
if it went to the primary the Sentinel named.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from arq.connections import create_pool
from arq.constants import default_queue_name
from redis import Redis

from backend.embedded import EmbeddedRedis, free_port
from backend.runtime import build_runtime
from backend.settings import Settings, load_settings
from backend.transport.redis_client import RedisTarget, arq_redis_settings
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
from tests.integration.sentinels import MASTER, primary_port, sentinel

pytestmark = pytest.mark.integration


@pytest.fixture
def sentinel_port(redis_server: EmbeddedRedis, embedded_tmp_dir: Path) -> Iterator[int]:
    """A ``redis-server --sentinel`` watching the test Redis as primary ``railyard``."""
    with sentinel(redis_server.port, embedded_tmp_dir) as port:
        yield port


def _sentinel_settings(migrated_url: str, port: int) -> Settings:
    return load_settings(
        environ={
            "DATABASE_URL": migrated_url,
            "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
            "RAILYARD_REDIS_SENTINELS": f"127.0.0.1:{port}",
            "RAILYARD_REDIS_SENTINEL_MASTER": "railyard",
        }
    )


async def test_runtime_and_arq_reach_the_primary_through_the_sentinel(
    migrated_url: str, redis_server: EmbeddedRedis, sentinel_port: int
) -> None:
    settings = _sentinel_settings(migrated_url, sentinel_port)
    runtime = await build_runtime(settings, pool_size=1)
    primary = Redis.from_url(redis_server.url)
    try:
        await runtime.redis.set("railyard:sentinel-probe", "via sentinel")
        assert primary.get("railyard:sentinel-probe") == b"via sentinel"
        job = await runtime.redis.enqueue_job("advance_run", "no-such-run", _job_id="probe-1")
        assert job is not None
        # arq's queue is a sorted set on the primary (what KEDA must not read as a list)
        assert primary.type(default_queue_name) == b"zset"
        assert primary.zscore(default_queue_name, "probe-1") is not None
        pool = await create_pool(arq_redis_settings(RedisTarget.from_settings(settings)))
        try:
            assert await pool.zcard(default_queue_name) == 1
        finally:
            await pool.aclose()
    finally:
        primary.delete("railyard:sentinel-probe", default_queue_name, "arq:job:probe-1")
        primary.close()
        await runtime.close()


@pytest.mark.faults
async def test_redis_primary_killed_sentinel_fails_over_nothing_acknowledged_is_lost(
    sink: HttpSink, embedded_tmp_dir: Path
) -> None:
    """A Redis primary and its replica behind a real Sentinel; ``railyard worker`` and
    ``railyard scheduler`` processes and the API find the primary through it. With 20 runs
    in flight the primary is SIGKILLed; the Sentinel promotes the replica; every run
    acknowledged before, during and after completes exactly once, and the worker, never
    restarted, is ready again (tests/integration/test_outages.py's checks)."""
    pg = await own_postgres(embedded_tmp_dir)
    primary = EmbeddedRedis(embedded_tmp_dir / "redis-a", persistence_off=True)
    replica = EmbeddedRedis(embedded_tmp_dir / "redis-b", persistence_off=True)
    primary.start()
    replica.start()
    Redis.from_url(replica.url).replicaof("127.0.0.1", primary.port)
    health = free_port()
    try:
        with sentinel(primary.port, embedded_tmp_dir, down_after_ms=1000) as port:
            env = {
                "RAILYARD_REDIS_SENTINELS": f"127.0.0.1:{port}",
                "RAILYARD_REDIS_SENTINEL_MASTER": MASTER,
            }
            closed = f"redis://127.0.0.1:{free_port()}/0"  # only the Sentinel is asked
            settings = own_settings(
                pg.url,
                closed,
                redis_sentinels=(f"127.0.0.1:{port}",),
                redis_sentinel_master=MASTER,
            )
            sink.delay = 0.2
            async with api(settings) as (rt, client):
                wf = await publish(client, http_flow(sink.url))
                with processes(settings, embedded_tmp_dir, **env) as start:
                    start("scheduler")
                    worker = start("worker", "worker", "--health-port", str(health))
                    await until_probe(health, 200)
                    before = await start_runs(client, wf["webhook_path"], 0, 20)

                    async def in_flight() -> bool:
                        return len(sink.requests) >= 3

                    await until(in_flight, 30, "runs to be in flight")
                    kill_redis(primary)
                    during = await start_runs(client, wf["webhook_path"], 20, 5)

                    async def promoted() -> bool:
                        return primary_port(port) == replica.port

                    await until(promoted, 30, "the Sentinel to promote the replica")
                    after = await start_runs(client, wf["webhook_path"], 25, 5)
                    await all_succeed(rt, before + during + after, timeout=90)
                    await until_probe(health, 200)
                    assert worker.poll() is None, "the worker exited"
            assert Redis.from_url(replica.url).role()[0] == b"master"
    finally:
        replica.stop()
        primary.stop()
        pg.stop()
