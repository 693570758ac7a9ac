"""Pieces every benchmark script shares: figure lines, quantiles, process CPU, readiness.

Each script prints its results as ``figure: <name> = <value> <unit>`` lines (one format, so
side-by-side runs can be compared by name).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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
