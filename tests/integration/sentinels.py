"""A real Redis Sentinel (``redis-server --sentinel``) watching a test's Redis, for
tests/integration/test_redis_sentinel.py."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from redis import Redis

from backend.embedded import free_port
from backend.embedded.redis_server import redis_executable

MASTER = "railyard"
"""The name the Sentinel monitors the primary under (``RAILYARD_REDIS_SENTINEL_MASTER``)."""


@contextmanager
def sentinel(primary_port: int, directory: Path, *, down_after_ms: int = 30000) -> Iterator[int]:
    """Yields the port of a Sentinel monitoring ``127.0.0.1:primary_port`` as
    :data:`MASTER` with quorum 1, declaring it down after ``down_after_ms`` milliseconds
    without an answer (then failing over to a replica); stopped on exit."""
    port = free_port()
    conf = directory / f"sentinel-{port}.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
        f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} 1\n"
        f"sentinel down-after-milliseconds {MASTER} {down_after_ms}\n"
        f"sentinel failover-timeout {MASTER} {max(2 * down_after_ms, 3000)}\n"
    )
    log = (directory / f"sentinel-{port}.log").open("wb")
    proc = subprocess.Popen([redis_executable(), str(conf), "--sentinel"], stdout=log, stderr=log)
    try:
        client = Redis(host="127.0.0.1", port=port, socket_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                if client.execute_command("SENTINEL", "get-master-addr-by-name", MASTER):
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


def primary_port(sentinel_port: int) -> int:
    """The port of the primary the Sentinel names now."""
    client = Redis(host="127.0.0.1", port=sentinel_port, socket_timeout=1)
    try:
        _, port = client.execute_command("SENTINEL", "get-master-addr-by-name", MASTER)
        return int(port)
    finally:
        client.close()
