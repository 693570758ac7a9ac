"""Through a real Redis Sentinel: the runtime's client and arq find the primary by name.

``REDIS_URL`` points at a port nothing listens on, so every command below succeeds only
if it went to the primary the Sentinel named.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from arq.connections import create_pool
from arq.constants import default_queue_name
from redis import Redis

from backend.embedded import EmbeddedRedis, free_port
from backend.embedded.redis_server import redis_executable
from backend.runtime import build_runtime
from backend.settings import Settings, load_settings
from backend.transport.redis_client import RedisTarget, arq_redis_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def sentinel(redis_server: EmbeddedRedis, embedded_tmp_dir: Path) -> Iterator[int]:
    """A ``redis-server --sentinel`` watching the test Redis as primary ``railyard``."""
    port = free_port()
    conf = embedded_tmp_dir / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {embedded_tmp_dir}\n"
        f"sentinel monitor railyard 127.0.0.1 {redis_server.port} 1\n"
    )
    log = (embedded_tmp_dir / "sentinel.log").open("wb")
    proc = subprocess.Popen([redis_executable(), str(conf), "--sentinel"], stdout=log, stderr=log)
    try:
        client = Redis(host="127.0.0.1", port=port, socket_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                if client.execute_command("SENTINEL", "get-master-addr-by-name", "railyard"):
                    break
            except OSError:
                pass
            except Exception as exc:  # a sentinel still starting answers a connection error
                if "Connection" not in type(exc).__name__:
                    raise
            assert proc.poll() is None, "redis sentinel exited"
            assert time.monotonic() < deadline, "redis sentinel did not start"
            time.sleep(0.1)
        client.close()
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


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
    migrated_url: str, redis_server: EmbeddedRedis, sentinel: int
) -> None:
    settings = _sentinel_settings(migrated_url, sentinel)
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
