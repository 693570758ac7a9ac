"""Sizing figures for docs/operations.md: memory, CPU and database connections of each
process idle and under load, and PostgreSQL disk and WAL bytes per run.

Starts embedded PostgreSQL (fsync on) and Redis, migrates, publishes bench/webhooks.py's
Webhook -> Set -> If workflow (its diagram is compiled by tests/unit/test_bench_diagrams.py),
then runs one ``railyard api``, one ``railyard worker`` and one ``railyard scheduler`` as
processes. After ``--idle-seconds`` (10) it reads each process's resident memory
(``VmRSS`` of /proc/<pid>/status) and its PostgreSQL connections (its sockets matched to
``pg_stat_activity.client_port``); then drives the webhook from ``--connections`` (8)
loopback connections for ``--seconds`` (20), sampling memory and connections every 0.25 s,
waits until every run ended (at most 120 s) and reads:

- ``rss_idle_<process>``, ``rss_peak_<process>`` (MiB; peak is ``VmHWM``),
- ``cpu_ms_per_run_<process>`` (CPU time of all its threads during the load, per run:
  load-insensitive),
- ``pg_connections_idle_<process>``, ``pg_connections_peak_<process>``,
- ``disk_bytes_per_run`` (growth of ``pg_total_relation_size`` summed over the schema's
  tables, indexes and TOAST included, per run) and ``wal_bytes_per_run`` (WAL written per
  run: what WAL archiving ships),
- ``runs``, ``runs_per_second`` and ``load_average`` (quote wall-time figures with it).

Bounded: requests only go to 127.0.0.1 and stop after ``--seconds``; ``--quick`` runs 5 s.
Run it with ``.venv/bin/python bench/sizing.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backend.embedded import free_port  # noqa: E402
from bench.cluster import Stack  # noqa: E402
from bench.common import cpu_seconds, figure, load_average  # noqa: E402
from bench.webhooks import count_runs, load_raw, pipeline, setup  # noqa: E402

PROCESSES = ("api", "worker", "scheduler")

SIZE_SQL = """
select coalesce(sum(pg_total_relation_size(c.oid)), 0)
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = 'public' and c.relkind in ('r', 'm')
"""


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of process ``pid`` in KiB (Linux /proc)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def local_tcp_ports(pid: int) -> set[int]:
    """Local TCP ports of the sockets process ``pid`` holds (its fds' socket inodes looked
    up in /proc/<pid>/net/tcp and tcp6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class Probe:
    """Samples of each process's memory and PostgreSQL connections."""

    def __init__(self, pids: dict[str, int], database_url: str) -> None:
        self.pids = pids
        self.database_url = database_url
        self.peak_connections = dict.fromkeys(pids, 0)

    async def connections(self) -> dict[str, int]:
        """PostgreSQL connections per process now."""
        import asyncpg

        conn = await asyncpg.connect(self.database_url.replace("+asyncpg", ""))
        try:
            rows = await conn.fetch(
                "select client_port from pg_stat_activity"
                " where datname = current_database() and pid <> pg_backend_pid()"
            )
        finally:
            await conn.close()
        server_ports = {r["client_port"] for r in rows}
        counts = {}
        for name, pid in self.pids.items():
            counts[name] = len(local_tcp_ports(pid) & server_ports)
            self.peak_connections[name] = max(self.peak_connections[name], counts[name])
        return counts

    async def sample_until(self, done: asyncio.Event) -> None:
        """Sample connections every 0.25 s until ``done`` (memory peaks come from VmHWM)."""
        while not done.is_set():
            await self.connections()
            await asyncio.sleep(0.25)


async def database_bytes(database_url: str) -> tuple[int, int]:
    """(bytes of the schema's relations, current WAL position in bytes)."""
    import asyncpg

    conn = await asyncpg.connect(database_url.replace("+asyncpg", ""))
    try:
        size = int(await conn.fetchval(SIZE_SQL))
        wal = int(await conn.fetchval("select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"))
        return size, wal
    finally:
        await conn.close()


async def measure(
    args: argparse.Namespace, env: dict[str, str], url: str, pids: dict[str, int]
) -> None:
    probe = Probe(pids, env["DATABASE_URL"])
    await asyncio.sleep(args.idle_seconds)
    idle = await probe.connections()
    for name, pid in pids.items():
        figure(f"rss_idle_{name}", memory_kib(pid)["VmRSS"] / 1024, "MiB")
        figure(f"pg_connections_idle_{name}", idle[name], "connections")
    runs_before, _ = await count_runs(env)
    size_before, wal_before = await database_bytes(env["DATABASE_URL"])
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    done = asyncio.Event()
    sampler = asyncio.create_task(probe.sample_until(done))
    started = time.monotonic()
    result: dict[str, Any] = await load_raw([url], args.connections, args.seconds)
    deadline = time.monotonic() + 120
    total, finished = await count_runs(env)
    while finished < total and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        total, finished = await count_runs(env)
    elapsed = time.monotonic() - started
    done.set()
    await sampler
    cpu_after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    size_after, wal_after = await database_bytes(env["DATABASE_URL"])
    runs = total - runs_before
    figure("runs", runs, "runs")
    figure("runs_completed", finished - runs_before, "runs")
    figure("runs_per_second", runs / elapsed, "runs/s")
    if result["errors"]:
        figure("webhook_errors", result["errors"], "requests")
    for name, pid in pids.items():
        figure(f"rss_peak_{name}", memory_kib(pid)["VmHWM"] / 1024, "MiB")
        figure(f"pg_connections_peak_{name}", probe.peak_connections[name], "connections")
        spent = (cpu_after[name] - cpu_before[name]) * 1000
        figure(f"cpu_ms_per_run_{name}", spent / max(runs, 1), "ms")
    figure("disk_bytes_per_run", (size_after - size_before) / max(runs, 1), "bytes")
    figure("wal_bytes_per_run", (wal_after - wal_before) / max(runs, 1), "bytes")
    figure("load_average", load_average(), "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="5 s of load, 3 s idle")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.idle_seconds = 5.0, 3.0

    from backend.workers.worker import loop_factory

    with Stack("railyard-sizing-") as stack:
        token = asyncio.run(setup(stack.env, pipeline()))
        pids, url = {}, ""
        for name in PROCESSES:
            if name == "api":
                proc, base = stack.api(name)
                url = f"{base}/hooks/{token}"
            else:
                port = str(free_port())
                live = f"http://127.0.0.1:{port}/health/live"
                proc = stack.spawn(name, name, "--health-port", port, ready=live)
            pids[name] = proc.pid
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(measure(args, stack.env, url, pids))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
