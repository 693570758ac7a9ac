"""Pieces every benchmark script shares: figure lines, quantiles, process CPU, readiness.

Each script prints its results as ``figure: <name> = <value> <unit>`` lines (one format, so
side-by-side runs can be compared by name).
"""

from __future__ import annotations

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


def pgbench_ceiling(pg: Any, clients: int = 4, seconds: int = 5) -> float:
    """Write transactions per second ``pgbench -N`` (the simple-update mix without the
    contended branch/teller updates; scale 1) reaches on the running embedded server ``pg``
    (a backend.embedded.EmbeddedPostgres) with ``clients`` connections for ``seconds``: the
    commit ceiling of that server on that disk, beside which a workload's commits per second
    are judged. Uses its own ``pgbench`` database; NaN when pgbench prints no rate.

    Raises subprocess.CalledProcessError when pgbench fails."""
    from backend.embedded import pg_bin_dir

    bench_db = "pgbench"
    pg.create_database(bench_db)
    pgbench = str(pg_bin_dir() / "pgbench")
    conn = ["-h", "127.0.0.1", "-p", str(pg.port), "-U", pg.user, bench_db]
    subprocess.run([pgbench, "-i", "-s", "1", "-q", *conn], check=True, capture_output=True)
    done = subprocess.run(
        [pgbench, "-N", "-c", str(clients), "-j", "2", "-T", str(seconds), *conn],
        check=True,
        capture_output=True,
        text=True,
    )
    tps = re.search(r"tps = ([\d.]+)", done.stdout)
    return float(tps.group(1)) if tps else math.nan


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
