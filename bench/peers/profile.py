"""Where Railyard's time goes: py-spy sampling of its processes during a load phase.

:class:`Sampler` attaches ``py-spy record --format raw`` (collapsed stacks: one line per
distinct stack, ``frame;frame;...;leaf <count>``, outermost first) to each process for the
length of a phase; :func:`summarise` turns the stacks into shares of the samples: by leaf
frame (self time), by the package the leaf frame's file belongs to, and by Railyard
function anywhere on the stack (inclusive time). py-spy counts only threads it sees
running (not idle ones), so the shares are of CPU time, not of wall time. Time in compiled
code without Python frames (uvloop's event loop, asyncpg's protocol, hiredis) is charged to
the nearest Python frame: ``Runner.run`` (asyncio's runner) self time is the event loop's
own work: polling, socket reads and writes, callbacks implemented in C.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
NO_FRAME = "(no Python frame)"
"""Samples of a running thread without any Python frame (a native thread, or a stack
py-spy could not walk): counted, so the shares are of all the CPU py-spy saw."""
OWN = ("backend/", "connectors/", "designer_schema/")
"""Railyard's own source trees (their frames are reported by function)."""


def package(path: str) -> str:
    """Where a frame's file belongs: ``sqlalchemy`` for .../site-packages/sqlalchemy/...,
    ``stdlib:asyncio`` for the standard library, ``backend/db`` for Railyard's own files
    (their first two path components), ``asyncpg`` for py-spy's shortened
    ``asyncpg/connection.py``, else the file name."""
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    found = re.search(r"/lib/python3\.\d+/(.+)$", path)
    if found:
        return "stdlib:" + found.group(1).split("/", 1)[0].removesuffix(".py")
    for own in OWN:
        at = path.find(own)
        if at >= 0:
            parts = path[at:].split("/")
            return "/".join(parts[:2]) if len(parts) > 2 else parts[0]
    if "/" in path and not path.startswith("/"):  # py-spy's short form: package/module.py
        return path.split("/", 1)[0]
    return Path(path).name or path


def parse_frame(frame: str) -> tuple[str, str]:
    """``"advance (/x/backend/workers/worker.py:88)"`` -> ``("advance", "/x/backend/...py")``;
    a frame without a file gives ``(frame, "")``."""
    found = FRAME.match(frame.strip())
    if not found:
        return frame.strip(), ""
    return found.group("func"), found.group("file")


def own_name(func: str, path: str) -> str | None:
    """``backend/workers/worker.py:advance`` for a frame of Railyard's own code, else None."""
    for own in OWN:
        at = path.find(own)
        if at >= 0:
            return f"{path[at:]}:{func}"
    return None


@dataclass
class Summary:
    """Shares (0..1) of ``samples`` CPU samples."""

    samples: int
    by_leaf: list[tuple[str, float]]
    by_package: list[tuple[str, float]]
    by_own_function: list[tuple[str, float]]


def summarise(collapsed: str, top: int = 12) -> Summary:
    """Shares of the samples in py-spy's raw (collapsed) output ``collapsed``: the ``top``
    leaf frames, the packages of the leaf frames (all), and Railyard's functions anywhere on
    the stack (inclusive, each counted once per stack; a lower bound: code that SQLAlchemy
    runs in a greenlet, or asyncio in a task of its own such as ``wait_for``'s, is sampled
    without its callers). A stack without frames counts as :data:`NO_FRAME`. Malformed
    lines are skipped."""
    leaves: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [parse_frame(f) for f in stack.split(";") if f.strip()]
        if not frames:
            leaves[NO_FRAME] += count
            packages[NO_FRAME] += count
            continue
        func, path = frames[-1]
        leaves[f"{func} ({package(path)})" if path else func] += count
        packages[package(path) if path else func] += count
        for name in {own_name(f, p) for f, p in frames} - {None}:
            assert name is not None
            inclusive[name] += count
    if total == 0:
        return Summary(0, [], [], [])

    def share(counter: Counter[str], n: int | None) -> list[tuple[str, float]]:
        return [(k, v / total) for k, v in counter.most_common(n)]

    return Summary(total, share(leaves, top), share(packages, None), share(inclusive, top))


def report(name: str, summary: Summary, top_packages: int = 10) -> list[str]:
    """Comment lines (``# profile <name>: ...``) printing a :class:`Summary`."""
    lines = [f"# profile {name}: {summary.samples} samples"]
    pkgs = summary.by_package[:top_packages]
    lines.append(f"# profile {name} by package: " + ", ".join(f"{k} {v:.0%}" for k, v in pkgs))
    for title, rows in (("self", summary.by_leaf), ("inclusive", summary.by_own_function)):
        for key, value in rows:
            lines.append(f"# profile {name} {title} {value:6.1%} {key}")
    return lines


class Sampler:
    """py-spy attached to processes for one phase (``rate`` samples per second each)."""

    def __init__(self, out: Path, rate: int = 200) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        self.rate = rate
        self.running: list[tuple[str, Path, subprocess.Popen[bytes]]] = []

    def attach(self, name: str, pid: int) -> None:
        """Start sampling process ``pid`` (its stacks go to ``<out>/<name>.txt``).

        Raises FileNotFoundError when py-spy is not installed (the test extras have it)."""
        spy = Path(sys.executable).with_name("py-spy")
        path = self.out / f"{name}.txt"
        argv = [str(spy), "record", "--pid", str(pid), "--format", "raw", "--rate"]
        argv += [str(self.rate), "--nonblocking", "--full-filenames", "--output", str(path)]
        log = (self.out / f"{name}.log").open("wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.running.append((name, path, proc))

    def detach(self) -> dict[str, Summary]:
        """Stop every sampler (SIGINT makes py-spy write its file); summaries by name, and
        of all processes together under ``all``."""
        for _, _, proc in self.running:
            proc.send_signal(signal.SIGINT)
        found = {}
        texts = []
        for name, path, proc in self.running:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            if path.exists():
                texts.append(path.read_text())
                found[name] = summarise(texts[-1])
        if len(texts) > 1:
            found["all"] = summarise("\n".join(texts))
        self.running = []
        return found
