"""A Railyard cluster on one machine for benchmarks, and the meters that price its work.

:class:`Cluster` starts embedded PostgreSQL (durable settings) and Redis in a temporary
directory, migrates, and spawns ``railyard api`` / ``railyard worker`` processes (each
waited for on its health route). :class:`Meter` takes :class:`Reading` snapshots of what the
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

import asyncpg
import redis.asyncio as aioredis

from backend import crypto
from backend.db.migrate import upgrade
from backend.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from bench.common import railyard, stop_processes, wait_http

TICKS = os.sysconf("SC_CLK_TCK")


def stat_cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` from ``/proc/<pid>/stat``, in seconds (clock-tick
    resolution, 10 ms; includes threads that already ended). 0.0 when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "; state is field 3
    return (int(fields[11]) + int(fields[12])) / TICKS


def children_of(parent: int) -> list[int]:
    """Process ids whose parent is ``parent`` (a scan of ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        if int(raw[raw.rindex(")") + 2 :].split()[1]) == parent:
            found.append(int(entry.name))
    return found


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

    cluster: Cluster
    conn: asyncpg.Connection
    redis: aioredis.Redis
    polls: int = 0

    @classmethod
    async def open(cls, cluster: Cluster) -> Meter:
        """A meter with its own PostgreSQL connection and Redis client."""
        conn = await asyncpg.connect(cluster.pg.dsn)
        return cls(cluster, conn, aioredis.from_url(cluster.redis.url))

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
            pg_cpu={pid: stat_cpu_seconds(pid) for pid in [postmaster, *children_of(postmaster)]},
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


class Cluster:
    """Embedded PostgreSQL (durable: fsync on) and Redis in a temporary directory, migrated,
    plus the ``railyard`` processes spawned with :meth:`spawn` (logs in ``<tmp>/logs``).
    Use as a context manager; leaving it stops every process and removes the directory."""

    def __init__(self) -> None:
        self.data = Path(tempfile.mkdtemp(prefix="railyard-bench-", dir="/tmp"))
        self.data.chmod(0o755)
        self.pg = EmbeddedPostgres(self.data / "pg")
        self.redis = EmbeddedRedis(self.data / "redis")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.kinds: dict[int, str] = {}
        self.env: dict[str, str] = {}

    def __enter__(self) -> Cluster:
        self.pg.start()
        self.redis.start()
        (self.data / "logs").mkdir()
        self.env = {
            **os.environ,
            "DATABASE_URL": self.pg.url,
            "REDIS_URL": self.redis.url,
            "RAILYARD_ENCRYPTION_KEY": crypto.generate_key(),
            "RAILYARD_ACCESS_LOG": "0",
            "RAILYARD_HTTP_ALLOW_PRIVATE": "1",
        }
        upgrade(self.pg.url)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(self.procs)
        self.redis.stop()
        self.pg.stop()
        shutil.rmtree(self.data, ignore_errors=True)

    def postmaster_pid(self) -> int:
        """The PostgreSQL server's main process id (first line of ``postmaster.pid``)."""
        return int((self.pg.data_dir / "postmaster.pid").read_text().split()[0])

    def adopt(self, kind: str, pid: int) -> None:
        """Meter process ``pid`` (not spawned here, not stopped here) as ``kind``."""
        self.kinds[pid] = kind

    def spawn(self, kind: str, argv: list[str], *, ready: str | None = None) -> int:
        """Start ``argv`` as a process of ``kind``; with ``ready`` (a URL) wait until it
        answers. Returns the process id."""
        log = (self.data / "logs" / f"{kind}{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        self.kinds[proc.pid] = kind
        if ready is not None:
            wait_http(ready, proc, timeout=120)
        return proc.pid

    def api(self) -> str:
        """Start a ``railyard api`` on a free port; its base URL."""
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        argv = [railyard(), "api", "--host", "127.0.0.1", "--port", str(port)]
        self.spawn("api", argv, ready=f"{base}/health/live")
        return base

    def worker(self) -> None:
        """Start a ``railyard worker`` and wait until its probe says it is ready."""
        port = free_port()
        argv = [railyard(), "worker", "--health-port", str(port)]
        self.spawn("worker", argv, ready=f"http://127.0.0.1:{port}/health/ready")

    def stop(self, procs: list[subprocess.Popen[bytes]]) -> None:
        """SIGTERM ``procs`` (graceful), kill those still running after 20 s, forget them."""
        stop_processes(procs, signal.SIGTERM, 20)
        self.procs = [p for p in self.procs if p not in procs]
        for p in procs:
            self.kinds.pop(p.pid, None)
