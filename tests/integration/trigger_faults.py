"""What the trigger fault tests (test_trigger_faults.py) drive real Railyard processes with:
the fault plugin installed into them, a vendor whose items keep arriving, a sender of
signed deliveries that retries as vendors do, the runs table locked so a process can be
killed between storing an event and starting its run, and the exactly-once checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import node
from tests.integration import fault_plugin
from tests.integration.railyard_processes import log_tails, until
from tests.local_http import LocalHTTPServer

REPO = Path(__file__).resolve().parents[2]


def install_fault_plugin(directory: Path) -> dict[str, str]:
    """Install :mod:`tests.integration.fault_plugin` as the distribution
    ``railyard-fault-plugin`` (its ``railyard.connectors`` entry point) into
    ``directory``; returns the environment a Railyard process finds it with.

    The distribution is what ``pip install --target`` leaves: its metadata on a path of
    ``PYTHONPATH``, so the processes load it as any installed plugin (entry points), and
    the test's own process, whose path does not have it, keeps its catalog.
    """
    info = directory / "railyard_fault_plugin-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: railyard-fault-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[railyard.connectors]\nfaultkit = tests.integration.fault_plugin:connector\n"
    )
    paths = [str(directory), str(REPO), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}


class ItemsVendor:
    """An API listing items (``GET /items`` -> ``{"items": [{"id", "seq"}, ...]}``, all of
    them, oldest first) while a thread adds one every ``every`` seconds, ``total`` in all.

    :meth:`hold` makes the next request wait (up to 20 s) until :meth:`release`: a poll
    caught in flight. ``requests`` counts the requests answered or held.
    """

    def __init__(self, total: int, every: float) -> None:
        self.total = total
        self.every = every
        self.items: list[dict[str, Any]] = []
        self.requests = 0
        self.held = threading.Event()
        self._hold = False
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: LocalHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/items"

    @property
    def done(self) -> bool:
        return len(self.items) >= self.total

    def hold(self) -> None:
        """Hold the next request until :meth:`release`."""
        self.held.clear()
        self._release.clear()
        self._hold = True

    def release(self) -> None:
        self._hold = False
        self._release.set()

    def _answer(self) -> bytes:
        with self._lock:
            self.requests += 1
            body = json.dumps({"items": list(self.items)}).encode()
            caught = self._hold
            self._hold = False
        if caught:
            self.held.set()
            self._release.wait(20)
        return body

    def _produce(self) -> None:
        for seq in range(1, self.total + 1):
            if self._stop.wait(self.every):
                return
            with self._lock:
                self.items.append({"id": f"item-{seq}", "seq": seq})

    def start(self) -> ItemsVendor:
        vendor = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                payload = vendor._answer()
                with contextlib.suppress(OSError):  # the poller was killed meanwhile
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = LocalHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        threading.Thread(target=self._produce, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.release()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@dataclass
class SignedSender:
    """Posts ``count`` signed events (``{"id": "event-<n>", "n": n}``) to ``url`` with
    ``concurrency`` connections, each until it is answered 2xx, as vendors retry: a
    refused connection, a lost answer, 5xx and 429 are tried again after ``retry_pause``
    seconds; any other status fails the sender. Every ``duplicate_every``-th event is sent
    once more after its 2xx (the at-least-once delivery vendors document)."""

    url: str
    secret: str
    count: int
    concurrency: int = 4
    pace: float = 0.02
    retry_pause: float = 0.1
    duplicate_every: int = 5
    delivered: set[str] = field(default_factory=set)
    attempts: int = 0
    failures: int = 0

    def ids(self) -> list[str]:
        return [f"event-{n}" for n in range(self.count)]

    async def _post(self, http: httpx.AsyncClient, n: int) -> None:
        body = json.dumps({"id": f"event-{n}", "n": n}).encode()
        while True:
            self.attempts += 1
            try:
                answer = await http.post(
                    self.url, content=body, headers=fault_plugin.sign(self.secret, body)
                )
            except httpx.TransportError:
                status = None
            else:
                status = answer.status_code
                if 200 <= status < 300:
                    return
                if status not in (429, 500, 502, 503, 504):
                    raise AssertionError(f"event-{n}: refused {status} {answer.text}")
            self.failures += 1
            await asyncio.sleep(self.retry_pause)

    async def run(self) -> None:
        numbers = iter(range(self.count))
        async with httpx.AsyncClient(timeout=10) as http:

            async def lane() -> None:
                for n in numbers:  # the lanes share one iterator
                    await self._post(http, n)
                    if self.duplicate_every and n % self.duplicate_every == 0:
                        await self._post(http, n)
                    self.delivered.add(f"event-{n}")
                    await asyncio.sleep(self.pace)

            await asyncio.gather(*(lane() for _ in range(self.concurrency)))


@contextlib.asynccontextmanager
async def runs_locked(runtime: Runtime) -> AsyncIterator[None]:
    """Hold ``LOCK TABLE runs IN SHARE MODE`` while inside: every run start (an insert
    into ``runs``) waits, so a process can be killed after it stored an event and
    before its run is stored. Reads go on."""
    async with runtime.engine.connect() as conn:
        await conn.execute(text("begin"))
        await conn.execute(text("lock table runs in share mode"))
        try:
            yield
        finally:
            await conn.execute(text("rollback"))


async def run_start_waiters(runtime: Runtime) -> set[int]:
    """PostgreSQL backend pids of the run starts (``INSERT INTO runs``) waiting for the
    lock :func:`runs_locked` holds (not some other write to ``runs``, e.g. retention's)."""
    async with runtime.engine.connect() as conn:
        waiting = await conn.execute(
            text(
                "select distinct l.pid from pg_locks l join pg_stat_activity a using (pid)"
                " where not l.granted and l.relation = 'runs'::regclass"
                " and a.query ilike '%insert into runs%'"
            )
        )
        return {int(pid) for (pid,) in waiting}


async def run_start_waiting(runtime: Runtime) -> bool:
    """True when a run start waits for the lock :func:`runs_locked` holds."""
    return bool(await run_start_waiters(runtime))


async def trigger_rows(runtime: Runtime, workflow_id: str) -> list[tuple[str, Any, Any]]:
    """``(event id, run id, error)`` of the workflow's inbox rows."""
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select dedupe_key, run_id, error from trigger_events"
                " where workflow_id = :w order by id"
            ),
            {"w": workflow_id},
        )
        return [tuple(r) for r in rows]


async def run_inputs(runtime: Runtime, workflow_id: str) -> list[tuple[Any, str, str]]:
    """``(input, idempotency key, status)`` of every run of the workflow."""
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text("select input, idempotency_key, status from runs where workflow_id = :w"),
            {"w": workflow_id},
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


async def until_every_event_has_a_run(
    runtime: Runtime, workflow_id: str, expected: Iterable[str], timeout: float
) -> None:
    """Wait until every event id of ``expected`` has an inbox row linked to a run (the
    sweep starts what a killed process stored but did not start, 10 s later)."""
    wanted = set(expected)

    async def linked() -> bool:
        rows = await trigger_rows(runtime, workflow_id)
        return wanted <= {key for key, run_id, _ in rows if run_id is not None}

    await until(linked, timeout, "every event to have its run")


async def assert_exactly_once(
    runtime: Runtime, workflow_id: str, expected: Iterable[str], id_of: Any
) -> None:
    """Each event id of ``expected`` has exactly one inbox row and exactly one run (the
    run whose idempotency key names the row), and no run exists for anything else;
    ``id_of(run input)`` is the event id a run was started for."""
    wanted = sorted(expected)
    rows = await trigger_rows(runtime, workflow_id)
    keys = [key for key, _, _ in rows]
    assert sorted(keys) == wanted, "one inbox row per event"
    assert all(error is None for _, _, error in rows), [r for r in rows if r[2]]
    runs = await run_inputs(runtime, workflow_id)
    started_for = sorted(id_of(input) for input, _, _ in runs)
    duplicates = [k for k, group in itertools.groupby(started_for) if len(list(group)) > 1]
    assert duplicates == [], f"events with more than one run: {duplicates}"
    assert started_for == wanted, "one run per event"
    keys_of_runs = {key for _, key, _ in runs}
    assert len(keys_of_runs) == len(runs)
    assert all(key.startswith("trigger-event:") for key in keys_of_runs)
    assert {status for _, _, status in runs} == {"succeeded"}


def monotonic(samples: list[Any], key: Any) -> bool:
    """True when ``key(sample)`` never decreases along ``samples``."""
    values = [key(s) for s in samples]
    return all(a <= b for a, b in itertools.pairwise(values))


class Sampler:
    """Reads ``read()`` every ``every`` seconds in the background while inside, keeping
    every value that differs from the last one."""

    def __init__(self, read: Any, every: float = 0.05) -> None:
        self.read = read
        self.every = every
        self.values: list[Any] = []
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            value = await self.read()
            if not self.values or value != self.values[-1]:
                self.values.append(value)
            await asyncio.sleep(self.every)

    async def __aenter__(self) -> Sampler:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.values.append(await self.read())


def items_trigger(vendor: ItemsVendor) -> dict[str, Any]:
    """``http.new_items`` over the vendor's items, newest by ``seq`` (cursor ``{"after":
    seq}``), the items there at the first poll included."""
    return node(
        "items",
        "http.new_items",
        url=vendor.url,
        items="items",
        id="id",
        mode="newest",
        order="seq",
        include_existing=True,
    )


async def poll_every_second(runtime: Runtime, workflow_id: str) -> None:
    """http.new_items polls at most every 30 s (its floor): the test's subscription
    polls every second, so faults find polls in flight within seconds."""
    async with runtime.engine.begin() as conn:
        await conn.execute(
            text("update trigger_subscriptions set interval_seconds = 1 where workflow_id = :w"),
            {"w": workflow_id},
        )


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc`` and reap it (5 s at most)."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(5)


def worker_name(proc: subprocess.Popen[bytes]) -> str:
    """The ``attempts.worker`` value of the ``railyard worker`` process ``proc``."""
    return f"{socket.gethostname()}:{proc.pid}"


async def calls_in_flight(runtime: Runtime, worker: str, step_id: str = "call") -> bool:
    """True when ``worker`` has an attempt of step ``step_id`` running."""
    async with runtime.engine.connect() as conn:
        running = await conn.execute(
            text(
                "select count(*) from attempts where worker = :worker"
                " and status = 'running' and step_id = :step"
            ),
            {"worker": worker, "step": step_id},
        )
        return bool(running.scalar_one())


async def call_attempts(
    runtime: Runtime, workflow_id: str, step_id: str = "call"
) -> list[tuple[str, str, str]]:
    """``(run id, status, worker)`` of every attempt of the runs' step ``step_id``."""
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select a.run_id::text, a.status, a.worker from attempts a"
                " join runs r on r.id = a.run_id"
                " where r.workflow_id = :w and a.step_id = :step"
            ),
            {"w": workflow_id, "step": step_id},
        )
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


async def assert_calls_once_after_kill(
    runtime: Runtime, workflow_id: str, killed: str, count: int
) -> None:
    """An attempt of the ``killed`` worker expired (the kill cut a call off) and each of
    the workflow's ``count`` runs has exactly one succeeded ``call`` attempt."""
    rows = await call_attempts(runtime, workflow_id)
    assert any(status == "expired" and who == killed for _, status, who in rows), (
        "an attempt of the killed worker expired"
    )
    succeeded = sorted(run for run, status, _ in rows if status == "succeeded")
    assert len(succeeded) == count and len(set(succeeded)) == count, (
        "each run's call step completed exactly once"
    )


async def unfinished_runs(runtime: Runtime, workflow_id: str, log_dir: Path, limit: int = 5) -> str:
    """A description of the workflow's runs that have not succeeded, for a failure
    message: run counts by status, up to ``limit`` runs with each step's state and each
    attempt's status, worker and lease, then the last lines of each process log in
    ``log_dir`` (``<name>.log``, as :func:`railyard_processes.processes` writes them)."""
    async with runtime.engine.connect() as conn:
        counts = await conn.execute(
            text("select status, count(*) from runs where workflow_id = :w group by status"),
            {"w": workflow_id},
        )
        lines = [f"runs by status: {dict(counts.all())}"]
        runs = await conn.execute(
            text(
                "select id::text, status, created_at from runs where workflow_id = :w"
                " and status <> 'succeeded' order by created_at limit :n"
            ),
            {"w": workflow_id, "n": limit},
        )
        for run_id, status, created in runs.all():
            steps = await conn.execute(
                text(
                    "select step_id, status, attempts, not_before from step_runs"
                    " where run_id = :r order by step_id"
                ),
                {"r": run_id},
            )
            attempts = await conn.execute(
                text(
                    "select step_id, number, status, worker, lease_expires_at, started_at,"
                    " finished_at, error from attempts where run_id = :r order by started_at"
                ),
                {"r": run_id},
            )
            lines.append(f"run {run_id} {status} created {created}: steps {steps.all()}")
            lines.extend(f"  attempt {dict(a._mapping)}" for a in attempts.all())
    lines.extend(log_tails(log_dir))
    return "\n".join(lines)
