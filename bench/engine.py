"""Engine benchmark: sequential latency, dispatch latency, durable throughput.

Run standalone from the repository root: ``python bench/engine.py``. It starts its own
embedded PostgreSQL (durable settings) and Redis in a temporary directory, local HTTP
endpoints (127.0.0.1, bench/endpoint.py, each its own process) and two ``railyard worker``
subprocesses, and prints one ``figure: <name> = <value> <unit>`` line per figure:

- (a) ``seq40_wall_median`` / ``_best``: runs of 40 sequential HTTP Request steps against
  an endpoint that answers after 10 ms: wall time from just before start_run to the run's
  ``finished_at``, median and best of 9 runs (target <= 0.50 s). Beside it the workers' CPU
  per step and ``endpoint_step_time_mean``, the endpoint's own time per request (10 ms
  plus its timer's lateness).
- (b) ``dispatch_p50`` / ``dispatch_p99``: per action step, the time from its ``step.ready``
  event to its ``step.started`` event (both stamped by PostgreSQL with ``clock_timestamp()``
  when written), over the runs of (a) (targets 5 ms / 25 ms). A step claimed in the
  transaction that made it ready (inline continuation) scores the time between the two
  writes, so (b) also prints the stricter ``step_gap_p50`` / ``step_gap_p99``: measured at
  the endpoint, from the moment it answered step k to the moment step k+1's request
  arrived: completing step k, its commit, claiming k+1 and the HTTP client's own work.
  ``dispatch_queued_median`` / ``_max``: the same ready -> started time for the first step of
  each run, the one that goes through the arq queue.
- ``http_client_cpu_per_request`` / ``httpx_bare_cpu_per_request``: the floor under each HTTP
  step of (a), in this process against the endpoint answering at once: CPU per request
  of the client an HTTP Request attempt gets (a guarded client per attempt over the
  process's shared keep-alive pool, backend/runtime.py), beside one bare
  ``httpx.AsyncClient`` kept open (medians of 3 interleaved rounds of 1,000 requests).
- ``load_average``: the 1-minute load average before and after, on one ``#`` line.
- ``fsync_floor``: ``pg_test_fsync``'s fdatasync time for one 8 kB write in the same
  directory: the floor of one durable commit.
- (c) ``throughput``: 200 runs of a 3-step workflow (three HTTP calls, no sleep) on 2 workers:
  runs/s and PostgreSQL write transactions per run (transaction id delta), beside
  ``pgbench -N`` (4 clients, 5 s) on the same server for the ceiling.

Bounded: at most 200 + 15 runs, every wait has a timeout.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import itertools

import httpx
from sqlalchemy import text

from backend.db.models import WorkflowVersion
from backend.runtime import Runtime, build_runtime
from backend.services.workflows import workflows
from bench.cluster import Stack
from bench.common import (
    cpu_seconds,
    figure,
    fsync_floor,
    load_average,
    manual_chain,
    pgbench_ceiling,
)
from connectors.host.outbound import guarded_connection_pool, make_http_client
from connectors.sdk.ssrf import SsrfPolicy
from designer_schema.diagram import Diagram

THROUGHPUT_RUNS = 200
SEQ_RUNS = 9  # runs of (a); the figure is their median


class Endpoint:
    """``bench/endpoint.py`` in a subprocess: a local HTTP/1.1 keep-alive endpoint on
    127.0.0.1 that answers after ``sleep_s`` seconds (a remote API taking that long).
    ``server_port`` is its port; :meth:`marks` fetches its ``(arrived, answered)``
    ``time.perf_counter()`` pairs in arrival order."""

    def __init__(self, sleep_s: float) -> None:
        script = Path(__file__).with_name("endpoint.py")
        self._process = subprocess.Popen(
            [sys.executable, str(script), "--sleep", str(sleep_s)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        self.server_port = int(self._process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.server_port}/"

    @property
    def pid(self) -> int:
        """The endpoint process's id."""
        return self._process.pid

    def marks(self) -> list[tuple[float, float]]:
        """The ``(arrived, answered)`` pairs of every request so far."""
        return [(a, b) for a, b in httpx.get(self.url + "marks", timeout=10).json()]

    def clear(self) -> None:
        """Forget the marks so far."""
        httpx.delete(self.url + "marks", timeout=10)

    def shutdown(self) -> None:
        """Stop the endpoint process."""
        self._process.terminate()
        self._process.wait(10)


def endpoint(sleep_s: float) -> Endpoint:
    """A started :class:`Endpoint` answering after ``sleep_s`` seconds."""
    return Endpoint(sleep_s)


def chain(n: int, url: str, trigger: str = "trigger.manual") -> Diagram:
    """``trigger`` (a trigger node type) followed by ``n`` HTTP Request steps, each POSTing
    ``{"i": <index>}`` to ``url``, one after the other."""
    return manual_chain(
        [
            (f"s{i}", "http.request", {"method": "POST", "url": url, "body": {"i": i}})
            for i in range(n)
        ],
        trigger,
    )


async def published(rt: Runtime, name: str, diagram: Diagram) -> WorkflowVersion:
    async with rt.sessionmaker() as session, session.begin():
        wf = await workflows.create_workflow(session, name, None)
        await workflows.save_draft(session, wf.id, diagram, rt.catalog)
        await workflows.publish(session, wf.id, rt.catalog, None)
        version = (
            await session.execute(
                text("select id from workflow_versions where workflow_id = :w"), {"w": wf.id}
            )
        ).scalar_one()
        return await session.get(WorkflowVersion, version)  # type: ignore[return-value]


async def wait_all(
    rt: Runtime, run_ids: list[uuid.UUID], timeout: float, *, every: float = 0.02
) -> None:
    """Wait until the runs ended, looking every ``every`` seconds (a light poll that
    leaves the cores to the workers; wall times come from the runs' ``finished_at``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with rt.engine.connect() as conn:
            left = (
                await conn.execute(
                    text(
                        "select count(*) from runs where id = any(:ids) and status not in"
                        " ('succeeded', 'failed', 'cancelled', 'timed_out')"
                    ),
                    {"ids": run_ids},
                )
            ).scalar_one()
        if left == 0:
            return
        await asyncio.sleep(every)
    raise TimeoutError(f"runs did not finish within {timeout} s")


async def run_wall(rt: Runtime, run_id: uuid.UUID, started: float) -> float:
    """Seconds from ``started`` (``time.time()`` before ``start_run``) to the run's
    ``finished_at`` (stamped by the worker that ended it; same machine clock)."""
    async with rt.engine.connect() as conn:
        finished = (
            await conn.execute(
                text("select extract(epoch from finished_at) from runs where id = :id"),
                {"id": run_id},
            )
        ).scalar_one()
    return float(finished) - started


async def current_xid(rt: Runtime) -> int:
    """PostgreSQL's next transaction id, minus one (``pg_current_xact_id()``, which takes an
    id itself). Only transactions that write are given an id, so the difference between
    two readings, less one, counts the write transactions in between: exact, where
    ``pg_stat_database`` counters reach the view up to 10 s late."""
    async with rt.engine.begin() as conn:
        return int((await conn.execute(text("select pg_current_xact_id()::text"))).scalar_one())


async def dispatch_latencies(rt: Runtime, run_ids: list[uuid.UUID]) -> list[tuple[str, float]]:
    """``(step id, ms from step.ready to step.started)`` for the action steps of ``run_ids``."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select r.step_id, extract(epoch from s.created_at - r.created_at) from events r"
                " join events s on s.run_id = r.run_id and s.step_id = r.step_id"
                " and s.kind = 'step.started'"
                " where r.kind = 'step.ready' and r.run_id = any(:ids)"
            ),
            {"ids": run_ids},
        )
        return [(str(step), float(v) * 1000) for step, v in rows]


def step_gaps(marks: list[tuple[float, float]], steps: int) -> list[float]:
    """Milliseconds from answering step k to step k+1 arriving, within each sequential run
    (``marks`` in arrival order, ``steps`` requests per run)."""
    gaps = []
    for start in range(0, len(marks) - steps + 1, steps):
        run = marks[start : start + steps]
        gaps += [(b[0] - a[1]) * 1000 for a, b in itertools.pairwise(run)]
    return gaps


HTTP_ROUNDS, HTTP_REQUESTS = 3, 1000


async def http_client_cpu(url: str) -> tuple[float, float]:
    """CPU ms per POST to ``url`` (answering at once) of an attempt's client (a new guarded
    client per request over one shared pool, as every HTTP Request attempt gets) and of
    one bare ``httpx.AsyncClient``: the medians of :data:`HTTP_ROUNDS` interleaved rounds
    of :data:`HTTP_REQUESTS` requests, after 100 warm-up requests each."""
    policy = SsrfPolicy(allow_private=True)
    pool = guarded_connection_pool(policy)
    bare = httpx.AsyncClient()

    async def attempt_client() -> None:
        client = make_http_client(policy, pool=pool)
        try:
            (await client.post(url, json={"i": 1}, headers={"Idempotency-Key": "k"})).json()
        finally:
            await client.aclose()

    async def bare_client() -> None:
        (await bare.post(url, json={"i": 1}, headers={"Idempotency-Key": "k"})).json()

    async def cpu_ms(send: Callable[[], Awaitable[None]], n: int) -> float:
        started = time.process_time()
        for _ in range(n):
            await send()
        return (time.process_time() - started) / n * 1000

    try:
        await cpu_ms(attempt_client, 100)
        await cpu_ms(bare_client, 100)
        rounds: dict[str, list[float]] = {"attempt": [], "bare": []}
        for _ in range(HTTP_ROUNDS):
            rounds["attempt"].append(await cpu_ms(attempt_client, HTTP_REQUESTS))
            rounds["bare"].append(await cpu_ms(bare_client, HTTP_REQUESTS))
        return statistics.median(rounds["attempt"]), statistics.median(rounds["bare"])
    finally:
        await bare.aclose()
        await pool.aclose()


async def measure(stack: Stack) -> None:
    """Every phase of the benchmark on a started ``stack``; prints the figures."""
    slow, fast = endpoint(0.010), endpoint(0.0)
    try:
        rt = await build_runtime(stack.settings(http_allow_private=True), pool_size=20)
        workers = [await asyncio.to_thread(stack.worker) for _ in range(2)]
        seq = await published(rt, "bench-seq40", chain(40, f"http://127.0.0.1:{slow.server_port}/"))
        three = await published(rt, "bench-3", chain(3, f"http://127.0.0.1:{fast.server_port}/"))

        # warm-up runs (both workers: connections, prepared statements), then (a)
        warm = [await rt.execution.start_run(three, {}, trigger="manual") for _ in range(6)]
        await wait_all(rt, [w.run_id for w in warm], 60)
        slow.clear()
        cpu0 = sum(cpu_seconds(w.pid) for w in workers)
        walls = []
        seq_runs = []
        for _ in range(SEQ_RUNS):
            t0 = time.time()
            started = await rt.execution.start_run(seq, {}, trigger="manual")
            await wait_all(rt, [started.run_id], 60, every=0.05)
            walls.append(await run_wall(rt, started.run_id, t0))
            seq_runs.append(started.run_id)
        figure("seq40_wall_median", statistics.median(walls), "s")
        figure("seq40_wall_best", min(walls), "s")
        cpu = sum(cpu_seconds(w.pid) for w in workers) - cpu0
        figure("seq40_worker_cpu_per_step", cpu / (SEQ_RUNS * 40) * 1000, "ms")

        # (b) dispatch latency over the action steps of (a), before the throughput flood
        found = await dispatch_latencies(rt, seq_runs)
        lat = sorted(ms for _, ms in found)
        # the first step of each run goes through the queue (start_run commits, then
        # enqueues; a worker polls); the others are claimed inline
        queued = sorted(ms for step, ms in found if step == "s0")
        figure("dispatch_queued_median", statistics.median(queued), "ms")
        figure("dispatch_queued_max", max(queued), "ms")
        figure("dispatch_p50", lat[len(lat) // 2], "ms")
        figure("dispatch_p99", lat[min(len(lat) - 1, int(len(lat) * 0.99))], "ms")
        marks = slow.marks()
        gaps = sorted(step_gaps(marks, 40))
        figure("step_gap_p50", gaps[len(gaps) // 2], "ms")
        figure("step_gap_p99", gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))], "ms")
        service = [(answered - arrived) * 1000 for arrived, answered in marks]
        figure("endpoint_step_time_mean", statistics.mean(service), "ms")

        # idle cost of the poll delay: both workers' CPU over 2 s with nothing to do
        cpu0 = sum(cpu_seconds(w.pid) for w in workers)
        await asyncio.sleep(2.0)
        idle = sum(cpu_seconds(w.pid) for w in workers) - cpu0
        figure("idle_worker_cpu", idle / 2.0 / len(workers) * 100, "% of a core")

        # (c) throughput with 2 workers
        before = await current_xid(rt)
        t0 = time.perf_counter()
        ids = []
        for _ in range(THROUGHPUT_RUNS):
            ids.append((await rt.execution.start_run(three, {}, trigger="manual")).run_id)
        await wait_all(rt, ids, 300)
        elapsed = time.perf_counter() - t0
        writes = await current_xid(rt) - before - 1
        figure("throughput_3step_2workers", THROUGHPUT_RUNS / elapsed, "runs/s")
        figure("pg_transactions_per_run", writes / THROUGHPUT_RUNS, "xact")

        await rt.close()

        attempt, bare = await http_client_cpu(fast.url)
        figure("http_client_cpu_per_request", attempt, "ms")
        figure("httpx_bare_cpu_per_request", bare, "ms")

        # pgbench -N ceiling on the same server
        tps = await asyncio.to_thread(pgbench_ceiling, stack.pg, 4, 5)
        figure("pgbench_N_tps", tps, "tps")
        figure("fsync_floor", await asyncio.to_thread(fsync_floor, stack.data), "ms")
    finally:
        slow.shutdown()
        fast.shutdown()


def main() -> None:
    before = load_average()
    with Stack(env={"RAILYARD_HTTP_ALLOW_PRIVATE": "1"}) as stack:
        asyncio.run(measure(stack))
    print(f"# load_average: {before:.2f} before, {load_average():.2f} after")


if __name__ == "__main__":
    main()
