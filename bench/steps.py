"""Per-step cost of durable action steps: a 3-step Text template workflow on 2 workers.

Run standalone from the repository root: ``python bench/steps.py`` (``--runs N`` sets the
throughput runs, at most 2,000). It starts the embedded stack of bench/cluster.py
(PostgreSQL with durable settings, Redis) and two ``railyard worker`` processes, publishes
``trigger.manual -> t0 -> t1 -> t2`` (three ``data.template`` action steps, each rendering
the previous step's text), and prints one ``figure: <name> = <value> <unit>`` line per
figure:

- ``steps_latency_median`` / ``_p95``: 30 sequential runs started in this process, wall time
  from just before ``start_run`` to the run's ``finished_at``.
- ``timeline.<phase>``: where those runs' time went (bench/timeline.py), the median over
  the 30 runs of each phase in ms, from PostgreSQL's event stamps and this process's
  clock: ``insert_statement`` (call -> the run's insert wrote its first event),
  ``start_returned`` (-> ``start_run`` returned: commit and enqueue), ``queue_hop`` (->
  the first step's ``step.started``: arq and a worker's claim), ``step.t0`` .. ``step.t2``
  (-> each step's ``step.succeeded``), ``run_end`` (-> the run's end event), ``total``;
  ``timeline.at.<mark>`` the same moments counted from the call.
- ``steps_throughput``: ``--runs`` runs (default 300) started as fast as possible:
  runs/s until the last one ended.
- Load-insensitive figures of the throughput phase: ``steps_worker_cpu_per_step`` (both
  workers' CPU, ms per step), ``steps_pg_transactions_per_run`` (write transactions, from
  the transaction id delta), ``steps_redis_commands_per_step`` (Redis ``INFO
  commandstats`` calls delta over the steps, the bench's own ``start_run`` enqueues
  included) and, on one ``#`` line, the commands that made it;
  ``steps_pg_commits_per_run``: committed PostgreSQL transactions per run (``pg_stat_database``
  delta after the counters settled; an autocommit statement, a read too, is one; the
  run's start in the bench process included).
- PostgreSQL's share of the throughput phase (bench/pg_share.py): ``steps_pg_cpu_per_run``
  (postmaster and backends, ms; the bench's own start statements and its 20 ms poll for
  the runs' end included), ``steps_pg_wal_bytes_per_run``, ``steps_pg_wal_records_per_run``,
  ``steps_pg_index_records_per_run`` (index entries written and page splits), per table
  ``steps_pg.<table>.hot_share``; with ``--statements`` (pg_stat_statements loaded at start)
  ``#`` lines of the costliest statements per run.
- With ``--timeline``: ``webhook_timeline.<phase>``, the same time line for 30 sequential
  requests to bench/peers' Railyard scenario (a Webhook answering with the last step ->
  three Text template steps) through a ``railyard api`` process, from the request sent to
  the answer read (``answer``: run end -> answer read: the commit, the notice to the
  waiting webhook, its read of the run, the HTTP answer); and ``fsync_floor``,
  ``pg_test_fsync``'s time for one 8 kB fdatasync in the stack's directory: the floor of
  each durable commit the time line contains; and, over those requests,
  ``webhook_api_cpu_per_run`` / ``webhook_workers_cpu_per_run`` (CPU ms per run of the API
  process and of both workers: a run the API executes itself, docs/engine.md "Eager
  execution", moves its steps' CPU from the workers to the API) and
  ``webhook_pg_transactions_per_run`` (write transactions per run).
- With ``--profile``: an extra phase of ``--runs`` runs (not in the figures) with py-spy on
  both workers, printed as bench/peers/profile.py's ``# profile`` table (shares of the CPU
  samples by package, leaf frame and Railyard function); ``--profile-dir`` keeps the stacks.

The wall-time figures depend on the machine's load: ``load_average`` is printed beside
them. Bounded: at most 2 x 2,000 + 80 runs, every wait has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
import uuid
from argparse import Namespace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import redis.asyncio as aioredis
from sqlalchemy import text

from backend.db.models import WorkflowVersion
from backend.runtime import Runtime, build_runtime
from bench import pg_share
from bench.cluster import Stack
from bench.common import (
    cpu_seconds,
    figure,
    fsync_floor,
    load_average,
    manual_chain,
    percentile,
)
from bench.engine import current_xid, published, run_wall, wait_all
from bench.peers.profile import Sampler, report
from bench.peers.railyard_peer import three_steps
from bench.timeline import Marks, fetch_stamps, figure_lines, marks_from_stamps, medians
from bench.webhook_answer import sequential
from bench.webhooks import setup
from designer_schema.diagram import Diagram

STEPS = 3
LATENCY_RUNS = 30
MAX_RUNS = 2000
# PostgreSQL backends report their counters to pg_stat_database within 10 s of idling.
STATS_SETTLE_SECONDS = 11.0


def templates(n: int = STEPS) -> Diagram:
    """``trigger.manual`` followed by ``n`` Text template steps in a chain; each renders
    the text of the step before it (the first, the trigger's input)."""
    first = "step {{ data.i }}: {{ input | tojson }}"
    later = "step {{ data.i }}: {{ input.text | default('start') }}"
    return manual_chain(
        [
            (f"t{i}", "data.template", {"template": later if i else first, "data": {"i": i}})
            for i in range(n)
        ]
    )


async def redis_calls(url: str) -> dict[str, int]:
    """Redis ``INFO commandstats``: calls so far per command name."""
    client = aioredis.Redis.from_url(url)
    try:
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def settled_commits(rt: Runtime) -> int:
    """Transactions committed in the bench's database so far (``pg_stat_database``),
    read after :data:`STATS_SETTLE_SECONDS` so every backend has reported its counts.
    An autocommit statement is a transaction of its own, so the difference of two
    readings counts the round trips that commit (reads in autocommit included; a
    transaction of several statements counts once). The bench's own polls roll back
    and are not counted."""
    await asyncio.sleep(STATS_SETTLE_SECONDS)
    async with rt.engine.connect() as conn:
        found = await conn.execute(
            text("select xact_commit from pg_stat_database where datname = current_database()")
        )
        return int(found.scalar_one())


async def latency_runs(
    rt: Runtime, version: WorkflowVersion, runs: int, dsn: str
) -> tuple[list[float], list[Marks]]:
    """``runs`` runs one after another: wall times in ms (``time.time()`` before
    ``start_run`` to the run's ``finished_at``) and their time-line marks (event stamps
    read from the database at ``dsn``)."""
    walls = []
    sent: list[tuple[uuid.UUID, float, float]] = []
    for _ in range(runs):
        t0 = time.time()
        started = await rt.execution.start_run(version, {"n": 1}, trigger="manual")
        returned = time.time()
        await wait_all(rt, [started.run_id], 30, every=0.002)
        walls.append(await run_wall(rt, started.run_id, t0) * 1000)
        sent.append((started.run_id, t0, returned))
    stamps = await fetch_stamps(dsn, [run_id for run_id, _, _ in sent])
    marks = [
        marks_from_stamps(t0, *stamps[run_id], returned=returned)
        for run_id, t0, returned in sent
        if run_id in stamps
    ]
    return walls, [m for m in marks if m is not None]


def print_timeline(prefix: str, marks: list[Marks]) -> None:
    """``figure: <prefix>.<phase> = <ms> ms`` lines of the median time line of ``marks``."""
    found = medians(marks)
    figure(f"{prefix}.runs", found.runs, "runs")
    for name, value in figure_lines(prefix, found):
        figure(name, value, "ms")


async def webhook_timeline(
    stack: Stack, runs: int, workers: list[subprocess.Popen[bytes]]
) -> list[Marks]:
    """The time lines of ``runs`` sequential webhook runs of bench/peers' 3-step scenario
    (Webhook answering with the last step -> three Text template steps) through a
    ``railyard api`` on ``stack`` (its ``workers`` already running), after 10 warm-up
    runs. Also prints the load-insensitive figures of those runs: the API's and the
    workers' CPU per run and the write transactions per run."""
    token = await setup(stack.env, three_steps())
    api, base = await asyncio.to_thread(stack.api)
    url = f"{base}/hooks/{token}"
    body = b'{"id": %d, "qty": 1}'  # what bench/peers sends
    await sequential(url, 10, body)
    rt = await build_runtime(stack.settings(), pool_size=2)
    try:
        xid0 = await current_xid(rt)
        api0, workers0 = cpu_seconds(api.pid), sum(cpu_seconds(w.pid) for w in workers)
        latencies, received, errors = await sequential(url, runs, body)
        api_cpu = cpu_seconds(api.pid) - api0
        workers_cpu = sum(cpu_seconds(w.pid) for w in workers) - workers0
        writes = await current_xid(rt) - xid0 - 1
    finally:
        await rt.close()
    figure("webhook_timeline.errors", errors, "requests")
    figure("webhook_api_cpu_per_run", api_cpu / runs * 1000, "ms")
    figure("webhook_workers_cpu_per_run", workers_cpu / runs * 1000, "ms")
    figure("webhook_pg_transactions_per_run", writes / runs, "xact")
    conn = await asyncpg.connect(stack.pg.dsn)
    try:
        rows = await conn.fetch("select id from runs where trigger = 'webhook' order by created_at")
    finally:
        await conn.close()
    ids = [row[0] for row in rows][-runs:]  # the requests were sequential: the last runs
    stamps = await fetch_stamps(stack.pg.dsn, ids)
    marks = [
        marks_from_stamps(got - took, *stamps[run_id], answered=got)
        for run_id, took, got in zip(ids, latencies, received, strict=True)
        if run_id in stamps
    ]
    return [m for m in marks if m is not None]


async def measure(stack: Stack, workers: list[subprocess.Popen[bytes]], args: Namespace) -> None:
    """The phases of the bench on a started ``stack`` with its ``workers``; prints figures."""
    rt = await build_runtime(stack.settings(), pool_size=20)
    version = await published(rt, "bench-templates", templates())
    warm = [await rt.execution.start_run(version, {}, trigger="manual") for _ in range(10)]
    await wait_all(rt, [w.run_id for w in warm], 60)

    walls, marks = await latency_runs(rt, version, LATENCY_RUNS, stack.pg.dsn)
    figure("load_average", load_average(), "")
    figure("steps_latency_median", statistics.median(walls), "ms")
    figure("steps_latency_p95", percentile(walls, 0.95), "ms")
    print_timeline("timeline", marks)

    runs = args.runs
    commits0 = await settled_commits(rt)  # also lets the table counters settle
    pg0 = await pg_share.snapshot(stack, args.statements)
    xid0, calls0 = await current_xid(rt), await redis_calls(stack.redis_url)
    cpu0 = sum(cpu_seconds(w.pid) for w in workers)
    t0 = time.perf_counter()
    ids = [
        (await rt.execution.start_run(version, {"n": i}, trigger="manual")).run_id
        for i in range(runs)
    ]
    await wait_all(rt, ids, 300)
    elapsed = time.perf_counter() - t0
    cpu = sum(cpu_seconds(w.pid) for w in workers) - cpu0
    pg1 = await pg_share.snapshot(stack, args.statements)
    writes = await current_xid(rt) - xid0 - 1
    calls1 = await redis_calls(stack.redis_url)
    # the two current_xid readings and the PostgreSQL snapshots committed too
    commits = await settled_commits(rt) - commits0 - 2 - pg0.queries - pg1.queries
    # CPU and WAL up to the runs' end; the table counters once they settled
    pg1.tables = (await pg_share.snapshot(stack)).tables
    delta = {k: v - calls0.get(k, 0) for k, v in calls1.items() if v - calls0.get(k, 0)}
    delta.pop("info", None)
    figure("load_average", load_average(), "")
    figure("steps_throughput", runs / elapsed, "runs/s")
    figure("steps_worker_cpu_per_step", cpu / (runs * STEPS) * 1000, "ms")
    figure("steps_pg_transactions_per_run", writes / runs, "xact")
    figure("steps_pg_commits_per_run", commits / runs, "commits")
    figure("steps_redis_commands_per_step", sum(delta.values()) / (runs * STEPS), "cmd")
    pg_share.report(pg0, pg1, await pg_share.wal_records(stack, pg0, pg1), runs)
    top = sorted(delta.items(), key=lambda kv: -kv[1])
    print(
        "# redis calls per step:",
        ", ".join(f"{k} {v / (runs * STEPS):.2f}" for k, v in top),
    )

    if args.profile:
        await profile(rt, version, workers, runs, args.profile_dir or stack.data / "profile")
    await rt.close()

    if args.timeline:
        marks = await webhook_timeline(stack, LATENCY_RUNS, workers)
        print_timeline("webhook_timeline", marks)
        figure("fsync_floor", await asyncio.to_thread(fsync_floor, stack.data), "ms")
        figure("load_average", load_average(), "")


async def profile(
    rt: Runtime,
    version: WorkflowVersion,
    workers: list[subprocess.Popen[bytes]],
    runs: int,
    where: Path,
) -> None:
    """An extra phase of ``runs`` runs (not in the figures: the sampler takes CPU too) with
    py-spy on both workers (bench/peers/profile.py's :class:`Sampler`); prints its
    ``# profile`` table per worker and for both together; the stacks stay in ``where``."""
    sampler = Sampler(where)
    for i, w in enumerate(workers):
        sampler.attach(f"worker{i}", w.pid)
    await asyncio.sleep(1.0)  # py-spy attached
    ids = [
        (await rt.execution.start_run(version, {"n": i}, trigger="manual")).run_id
        for i in range(runs)
    ]
    await wait_all(rt, ids, 300)
    for name, summary in (await asyncio.to_thread(sampler.detach)).items():
        for line in report(name, summary):
            print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="throughput runs (max 2,000)")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="also the webhook variant's time line and the fsync floor (about a minute more)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy both workers over an extra phase"
    )
    parser.add_argument("--profile-dir", type=Path, help="keep py-spy's stacks here")
    parser.add_argument(
        "--statements",
        action="store_true",
        help="load pg_stat_statements and print the costliest statements per run",
    )
    args = parser.parse_args(argv)
    args.runs = min(max(args.runs, 1), MAX_RUNS)
    with Stack() as stack:
        if args.statements and not asyncio.run(pg_share.enable_statements(stack)):
            print("# pg_stat_statements is not available: no statement figures")
            args.statements = False
        workers = [stack.worker(f"worker{i}") for i in range(2)]
        asyncio.run(measure(stack, workers, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
