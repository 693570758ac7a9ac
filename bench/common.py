"""Pieces every benchmark script shares: figure lines, quantiles, process CPU, readiness.

Each script prints its results as ``figure: <name> = <value> <unit>`` lines (one format, so
side-by-side runs can be compared by name).
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx


def figure(name: str, value: float, unit: str, digits: int = 4) -> None:
    """Print one ``figure: <name> = <value> <unit>`` line (``digits`` significant digits)."""
    print(f"figure: {name} = {value:.{digits}g} {unit}", flush=True)


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` (0..1) quantile of ``values`` by nearest rank; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def cpu_seconds(pid: int) -> float:
    """Seconds on a CPU of every thread of process ``pid`` so far (Linux: the first field of
    /proc/<pid>/task/<tid>/schedstat, in nanoseconds; clock ticks would be 10 ms coarse).
    Threads that ended before the call are not counted; read it before and after a phase
    from a long-lived process.

    Raises FileNotFoundError when the process is gone."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except FileNotFoundError:  # the thread ended meanwhile
            continue
    return total / 1e9


def railyard() -> str:
    """Path of the ``railyard`` command of the running interpreter's environment."""
    exe = Path(sys.executable).parent / "railyard"
    return str(exe) if exe.exists() else shutil.which("railyard") or "railyard"


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Poll ``url`` every 0.2 s until it answers below 500 (seconds: ``timeout``).

    Raises RuntimeError when ``proc`` exits first, TimeoutError when time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} not ready after {timeout:g} s")


async def pg_counters(database_url: str) -> tuple[int, int]:
    """``(transactions committed, transaction ids used)`` of the database so far.

    The first is ``pg_stat_database.xact_commit`` (every committed transaction, reads
    included, as the server last flushed its statistics: read it after a pause of a
    second); the second is ``txid_current()``, which moves once per WRITE transaction (and
    once for this call). Differences across a phase, divided by its runs, are the
    transactions per run."""
    from sqlalchemy import text

    from backend.db.engine import make_engine

    engine = make_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            commits = (
                await conn.execute(
                    text(
                        "select xact_commit from pg_stat_database"
                        " where datname = current_database()"
                    )
                )
            ).scalar_one()
            xid = (await conn.execute(text("select txid_current()"))).scalar_one()
            await conn.commit()
            return int(commits), int(xid)
    finally:
        await engine.dispose()


async def redis_commands(redis_url: str) -> int:
    """Commands the Redis server has processed so far (``INFO stats``
    ``total_commands_processed``; this call's own INFO counts too)."""
    from redis.asyncio import Redis

    client = Redis.from_url(redis_url)
    try:
        return int((await client.info("stats"))["total_commands_processed"])
    finally:
        await client.aclose()


def load_average() -> float:
    """The machine's 1-minute load average (quote it beside wall-time figures)."""
    return os.getloadavg()[0]


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read one HTTP/1.1 response: ``(status, keep-alive)``; the body is read and dropped."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = None
    chunked = False
    keep = True
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"connection" and value.strip().lower() == b"close":
            keep = False
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length is not None:
        await reader.readexactly(length)
    else:
        await reader.read()
        keep = False
    return status, keep


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGINT every process still running, wait up to 15 s each, then kill."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()


class Stack:
    """Embedded PostgreSQL (durable settings) and Redis in a fresh directory under /tmp,
    migrated, with the environment Railyard's commands need (``env``: ``DATABASE_URL``,
    ``REDIS_URL``, a new encryption key, no access log); :meth:`spawn` starts ``railyard``
    commands logging to ``<dir>/logs/<name>.log``. Use as a context manager: on exit every
    spawned process is stopped, both servers stopped and the directory removed."""

    def __init__(self) -> None:
        from backend import crypto
        from backend.db.migrate import upgrade
        from backend.embedded import EmbeddedPostgres, EmbeddedRedis

        self.data = Path(tempfile.mkdtemp(prefix="railyard-bench-", dir="/tmp"))
        self.data.chmod(0o755)
        (self.data / "logs").mkdir()
        self.pg = EmbeddedPostgres(self.data / "pg")
        self.redis = EmbeddedRedis(self.data / "redis")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pg.start()
        self.redis.start()
        self.env = {
            **os.environ,
            "DATABASE_URL": self.pg.url,
            "REDIS_URL": self.redis.url,
            "RAILYARD_ENCRYPTION_KEY": crypto.generate_key(),
            "RAILYARD_ACCESS_LOG": "0",
        }
        upgrade(self.pg.url)

    def spawn(self, name: str, *argv: str) -> subprocess.Popen[bytes]:
        """Start ``railyard <argv>`` with :attr:`env`; stopped when the stack closes."""
        out = (self.data / "logs" / f"{name}.log").open("wb")
        p = subprocess.Popen(
            [railyard(), *argv], env=self.env, stdout=out, stderr=subprocess.STDOUT
        )
        self.procs.append(p)
        return p

    def api(self, name: str = "api") -> tuple[subprocess.Popen[bytes], str]:
        """Start ``railyard api`` on a free loopback port once it answers: ``(process,
        base URL)``."""
        from backend.embedded import free_port

        port = free_port()
        p = self.spawn(name, "api", "--host", "127.0.0.1", "--port", str(port))
        wait_http(f"http://127.0.0.1:{port}/health/live", p)
        return p, f"http://127.0.0.1:{port}"

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *_exc: object) -> None:
        try:
            stop_all(self.procs)
        finally:
            self.redis.stop()
            self.pg.stop()
            shutil.rmtree(self.data, ignore_errors=True)
