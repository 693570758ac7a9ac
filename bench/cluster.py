"""A Railyard cluster on one machine for benchmarks, and the meters that price its work.

:class:`Stack` is the one embedded stack every bench script runs on: embedded PostgreSQL
(durable settings) and Redis in a temporary directory, migrated, and the ``railyard api`` /
``railyard worker`` processes it spawns (each waited for on its health route).
:class:`Meter` takes :class:`Reading` snapshots of what the
cluster spent: CPU seconds per process (``/proc/<pid>/stat`` utime + stime), PostgreSQL's
server processes together, Redis (``INFO cpu``), the whole machine (``/proc/stat``),
PostgreSQL commits (``pg_stat_database.xact_commit``), write transactions (transaction id
delta), WAL bytes (``pg_current_wal_lsn`` delta) and Redis commands (``INFO commandstats``).
The difference of two readings, less the meter's own queries, is the cost of what ran in
between.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import redis.asyncio as aioredis

from bench.common import (
    child_pids,
    postmaster_pid,
    process_cpu_seconds,
    railyard,
    stop_processes,
    wait_http,
)

TICKS = os.sysconf("SC_CLK_TCK")


def stat_cpu_seconds(pid: int) -> float:
    """:func:`bench.common.process_cpu_seconds` of ``pid``; 0.0 when the process is gone."""
    try:
        return process_cpu_seconds(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def machine_busy_seconds() -> tuple[float, int]:
    """``(busy CPU seconds summed over all cores since boot, cores)`` from ``/proc/stat``:
    everything but idle and iowait."""
    lines = Path("/proc/stat").read_text().splitlines()
    ticks = [int(v) for v in lines[0].split()[1:]]
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3].isdigit())
    return (sum(ticks) - ticks[3] - ticks[4]) / TICKS, cores


@dataclass
class Reading:
    """One snapshot of the cluster's counters (seconds, counts and bytes since start)."""

    wall: float
    process_cpu: dict[int, float]
    pg_cpu: dict[int, float]
    machine_busy: float
    xact_commit: int
    xid: int
    wal_bytes: int
    redis_calls: int
    redis_cpu: float


@dataclass
class Cost:
    """What the cluster spent between two readings: ``wall`` seconds; ``cpu`` seconds per
    process kind (``api``, ``worker``, ``pg``, ``redis``, plus any other kind spawned) and
    ``cpu_max`` the busiest single process of each kind; ``machine_cores`` busy cores on
    average; PostgreSQL ``commits`` (the meter's own queries taken out), ``writes`` (write
    transactions), ``wal_bytes``; Redis ``redis_calls`` (the meter's own INFO calls taken
    out)."""

    wall: float
    cpu: dict[str, float]
    cpu_max: dict[str, float]
    processes: dict[str, int]
    machine_cores: float
    cores: int
    commits: int
    writes: int
    wal_bytes: int
    redis_calls: int


@dataclass
class Meter:
    """Reads the counters of ``cluster``; counts its own PostgreSQL statements (``polls``)
    so that :meth:`cost` can take them out of the commit count."""

    cluster: Stack
    conn: asyncpg.Connection
    redis: aioredis.Redis
    polls: int = 0

    @classmethod
    async def open(cls, cluster: Stack) -> Meter:
        """A meter with its own PostgreSQL connection and Redis client."""
        conn = await asyncpg.connect(cluster.pg.dsn)
        return cls(cluster, conn, aioredis.from_url(cluster.redis_url))

    async def close(self) -> None:
        """Close the meter's connections."""
        await self.conn.close()
        await self.redis.aclose()

    async def fetchrow(self, sql: str, *args: object) -> asyncpg.Record:
        """One autocommit query on the meter's connection (counted as one commit)."""
        self.polls += 1
        row = await self.conn.fetchrow(sql, *args)
        assert row is not None, sql
        return row

    async def read(self) -> Reading:
        """Snapshot every counter. Redis first (two INFO calls), then PostgreSQL (one
        statement, which takes a transaction id); both are subtracted by :meth:`cost`."""
        stats = await self.redis.info("commandstats")
        calls = sum(int(v["calls"]) for v in stats.values())
        cpu = await self.redis.info("cpu")
        row = await self.conn.fetchrow(
            "select (select xact_commit from pg_stat_database where datname = current_database()),"
            " pg_current_xact_id()::text::bigint,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
        )
        postmaster = self.cluster.postmaster_pid()
        busy, _ = machine_busy_seconds()
        assert row is not None
        return Reading(
            wall=time.monotonic(),
            process_cpu={pid: stat_cpu_seconds(pid) for pid in self.cluster.kinds},
            pg_cpu={pid: stat_cpu_seconds(pid) for pid in [postmaster, *child_pids(postmaster)]},
            machine_busy=busy,
            xact_commit=int(row[0]),
            xid=int(row[1]),
            wal_bytes=int(row[2]),
            redis_calls=calls,
            redis_cpu=float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
        )

    def cost(self, before: Reading, after: Reading, polls: int, settled: Reading) -> Cost:
        """The cost between ``before`` and ``after`` (the moment the work ended); ``polls``
        is the number of :meth:`fetchrow` calls made between ``before`` and ``settled``, a
        reading taken over 10 s after ``after`` with nothing else running: a backend's
        statistics reach ``pg_stat_database`` up to 10 s after it went idle, so commits are
        counted up to ``settled``."""
        cpu: dict[str, float] = {}
        cpu_max: dict[str, float] = {}
        processes: dict[str, int] = {}
        for pid, kind in self.cluster.kinds.items():
            spent = after.process_cpu.get(pid, 0.0) - before.process_cpu.get(pid, 0.0)
            cpu[kind] = cpu.get(kind, 0.0) + spent
            cpu_max[kind] = max(cpu_max.get(kind, 0.0), spent)
            processes[kind] = processes.get(kind, 0) + 1
        pg = {pid: after.pg_cpu[pid] - before.pg_cpu.get(pid, 0.0) for pid in after.pg_cpu}
        cpu["pg"], cpu_max["pg"] = sum(pg.values()), max(pg.values(), default=0.0)
        cpu["redis"] = cpu_max["redis"] = after.redis_cpu - before.redis_cpu
        wall = after.wall - before.wall
        _, cores = machine_busy_seconds()
        return Cost(
            wall=wall,
            cpu=cpu,
            cpu_max=cpu_max,
            processes=processes,
            machine_cores=(after.machine_busy - before.machine_busy) / wall,
            cores=cores,
            # the statements of "before" and "after" commit after they read the counter
            commits=settled.xact_commit - before.xact_commit - 2 - polls,
            # "after" took a transaction id itself
            writes=after.xid - before.xid - 1,
            wal_bytes=after.wal_bytes - before.wal_bytes,
            # both INFO calls of "before" are counted by "after"
            redis_calls=after.redis_calls - before.redis_calls - 2,
        )


class Stack:
    """The one embedded stack every bench runs on: PostgreSQL (durable settings: fsync,
    synchronous_commit and full_page_writes on, unless ``fast``) and, unless ``redis`` is
    False, Redis, in a fresh directory under /tmp (``prefix``), migrated to the newest
    schema; plus the ``railyard`` processes it spawns (their output in
    ``<data>/logs/<kind>-<n>.log``).

    :attr:`env` is the environment those processes run with: ``os.environ`` plus
    ``DATABASE_URL``, ``REDIS_URL`` (with Redis), a fresh ``RAILYARD_ENCRYPTION_KEY``, the
    access log off, and ``env`` (e.g. ``{"RAILYARD_HTTP_ALLOW_PRIVATE": "1"}`` for HTTP
    steps against local endpoints). :attr:`kinds` maps each process id to its kind (the
    meters of bench/cluster.py price CPU by kind; :meth:`adopt` adds processes started
    elsewhere).

    Use as a context manager (entering starts and migrates; enter it outside a running
    event loop: the migration runs its own). Leaving it stops every spawned process
    (SIGTERM, killed after 20 s), both servers, and removes the directory unless ``keep``.
    """

    def __init__(
        self,
        prefix: str = "railyard-bench-",
        *,
        redis: bool = True,
        fast: bool = False,
        env: dict[str, str] | None = None,
        keep: bool = False,
    ) -> None:
        from backend.embedded import EmbeddedPostgres, EmbeddedRedis

        self.data = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
        self.data.chmod(0o755)
        (self.data / "logs").mkdir()
        self.pg = EmbeddedPostgres(self.data / "pg", fast=fast)
        self.redis = EmbeddedRedis(self.data / "redis") if redis else None
        self.keep = keep
        self.extra_env = dict(env or {})
        self.env: dict[str, str] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.kinds: dict[int, str] = {}

    @property
    def redis_url(self) -> str:
        """The Redis URL. Raises RuntimeError for a stack started without Redis."""
        if self.redis is None:
            raise RuntimeError("this stack runs without Redis")
        return self.redis.url

    def __enter__(self) -> Stack:
        from backend import crypto
        from backend.db.migrate import upgrade

        try:
            self.pg.start()
            env = {"DATABASE_URL": self.pg.url}
            if self.redis is not None:
                self.redis.start()
                env["REDIS_URL"] = self.redis.url
            self.env = {
                **os.environ,
                **env,
                "RAILYARD_ENCRYPTION_KEY": crypto.generate_key(),
                "RAILYARD_ACCESS_LOG": "0",
                **self.extra_env,
            }
            upgrade(self.pg.url)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        try:
            self.stop(list(self.procs))
        finally:
            if self.redis is not None:
                self.redis.stop()
            self.pg.stop()
            if not self.keep:
                shutil.rmtree(self.data, ignore_errors=True)

    def settings(self, **overrides: Any) -> Any:
        """backend.settings.Settings for an in-process runtime on this stack (nothing read
        from the environment; ``overrides`` as load_settings takes them)."""
        from backend.settings import load_settings

        urls: dict[str, Any] = {"database_url": self.pg.url}
        if self.redis is not None:
            urls["redis_url"] = self.redis.url
        return load_settings(environ={}, **urls, **overrides)

    def postmaster_pid(self) -> int:
        """PostgreSQL's main process id (see :func:`postmaster_pid`)."""
        return postmaster_pid(self.pg)

    def adopt(self, kind: str, pid: int) -> None:
        """Count process ``pid`` (started elsewhere, not stopped here) as ``kind``."""
        self.kinds[pid] = kind

    def spawn(self, kind: str, *argv: str, ready: str | None = None) -> subprocess.Popen[bytes]:
        """Start ``railyard <argv>`` with :attr:`env` as a process of ``kind``; with
        ``ready`` (a URL) wait up to 120 s until it answers below 500.

        Raises RuntimeError when the process exits before it is ready, TimeoutError when
        it never is."""
        log = (self.data / "logs" / f"{kind}-{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(
            [railyard(), *argv], env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.procs.append(proc)
        self.kinds[proc.pid] = kind
        if ready is not None:
            wait_http(ready, proc, timeout=120)
        return proc

    def api(self, kind: str = "api") -> tuple[subprocess.Popen[bytes], str]:
        """``railyard api`` on a free loopback port once it answers: ``(process, base
        URL)``."""
        from backend.embedded import free_port

        base = f"http://127.0.0.1:{free_port()}"
        port = base.rsplit(":", 1)[1]
        proc = self.spawn(
            kind, "api", "--host", "127.0.0.1", "--port", port, ready=f"{base}/health/live"
        )
        return proc, base

    def worker(self, kind: str = "worker") -> subprocess.Popen[bytes]:
        """``railyard worker`` once its probe says it is ready (connected, polling)."""
        from backend.embedded import free_port

        port = str(free_port())
        ready = f"http://127.0.0.1:{port}/health/ready"
        return self.spawn(kind, "worker", "--health-port", port, ready=ready)

    def stop(self, procs: list[subprocess.Popen[bytes]]) -> None:
        """Stop ``procs`` gracefully (SIGTERM, killed after 20 s) and forget them."""
        stop_processes(procs, signal.SIGTERM, 20)
        self.procs = [p for p in self.procs if p not in procs]
        for p in procs:
            self.kinds.pop(p.pid, None)
