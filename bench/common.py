"""Pieces every benchmark script shares: figure lines, quantiles, process CPU, readiness.

Each script prints its results as ``figure: <name> = <value> <unit>`` lines (one format, so
side-by-side runs can be compared by name).
"""

from __future__ import annotations

import math
import os
import shutil
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


def load_average() -> float:
    """The machine's 1-minute load average (quote it beside wall-time figures)."""
    return os.getloadavg()[0]


def start_workers(env: dict[str, str], count: int = 2) -> list[subprocess.Popen[bytes]]:
    """``count`` ``railyard worker`` processes with environment ``env`` (output dropped);
    stop them with :func:`stop_processes`."""
    return [
        subprocess.Popen(
            [railyard(), "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(count)
    ]


def stop_processes(procs: list[subprocess.Popen[bytes]], grace: float = 10) -> None:
    """Terminate ``procs``, then kill any still running after ``grace`` seconds each."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()


def manual_chain(steps: list[tuple[str, str, dict[str, Any]]]) -> Diagram:
    """A diagram ``trigger.manual -> steps[0] -> steps[1] -> ...``; each step is
    ``(id, node type, config)``."""
    nodes: list[dict[str, Any]] = [
        {"id": "start", "type": "trigger.manual", "position": {"x": 0, "y": 0}, "config": {}}
    ]
    edges = []
    previous = "start"
    for i, (sid, node_type, config) in enumerate(steps):
        position = {"x": 200 * (i + 1), "y": 0}
        nodes.append({"id": sid, "type": node_type, "position": position, "config": config})
        edges.append({"id": f"e{i}", "source": previous, "target": sid})
        previous = sid
    return msgspec.convert({"nodes": nodes, "edges": edges}, Diagram)
