"""Per-step cost of durable action steps: a 3-step Text template workflow on 2 workers.

Run standalone from the repository root: ``python bench/steps.py`` (``--runs N`` sets the
throughput runs, at most 2,000; ``--profile FILE`` records the first worker with
``py-spy`` during the throughput phase, a speedscope JSON file). It starts its own
embedded PostgreSQL (durable settings) and Redis in a temporary directory and two
``railyard worker`` subprocesses, publishes ``trigger.manual -> t0 -> t1 -> t2`` (three
``data.template`` action steps, each rendering the previous step's text), and prints one
``figure: <name> = <value> <unit>`` line per figure:

- ``steps_latency_median`` / ``_p95``: 30 sequential runs, wall time from just before
  ``start_run`` to the run's ``finished_at``.
- ``steps_queue_hop_median``: over the same runs, the first step's ``step.ready`` ->
  ``step.started`` time (both stamped by PostgreSQL): enqueue, wake-up, pickup, claim.
- ``steps_throughput``: ``--runs`` runs (default 300) started as fast as possible:
  runs/s until the last one ended.
- Load-insensitive figures of the throughput phase: ``steps_worker_cpu_per_step`` (both
  workers' CPU, ms per step), ``steps_pg_transactions_per_run`` (write transactions, from
  the transaction id delta), ``steps_redis_commands_per_step`` (Redis ``INFO
  commandstats`` calls delta over the steps, the bench's own ``start_run`` enqueues
  included) and, on one ``#`` line, the commands that made it.

The wall-time figures depend on the machine's load: ``load_average`` is printed beside
them. Bounded: at most 2,000 + 36 runs, every wait has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis

from backend.db.migrate import upgrade
from backend.embedded import EmbeddedPostgres, EmbeddedRedis
from backend.runtime import build_runtime
from backend.settings import load_settings
from bench.common import (
    cpu_seconds,
    figure,
    load_average,
    manual_chain,
    percentile,
    start_workers,
    stop_processes,
)
from bench.engine import current_xid, dispatch_latencies, published, run_wall, wait_all
from designer_schema.diagram import Diagram

STEPS = 3
LATENCY_RUNS = 30
MAX_RUNS = 2000


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


def profiler(pid: int, out: str) -> subprocess.Popen[bytes]:
    """``py-spy record`` of process ``pid`` into ``out`` (speedscope JSON) until stopped."""
    spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen(
        [
            str(spy),
            "record",
            "--pid",
            str(pid),
            "--format",
            "speedscope",
            "-o",
            out,
            "--rate",
            "250",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def main(runs: int, profile: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="railyard-bench-") as tmp:
        pg = EmbeddedPostgres(Path(tmp) / "pg")
        redis = EmbeddedRedis(Path(tmp) / "redis")
        pg.start()
        redis.start()
        workers: list[subprocess.Popen[bytes]] = []
        try:
            await asyncio.to_thread(upgrade, pg.url)
            env = {**os.environ, "DATABASE_URL": pg.url, "REDIS_URL": redis.url}
            settings = load_settings(environ={}, database_url=pg.url, redis_url=redis.url)
            rt = await build_runtime(settings, pool_size=20)
            workers += start_workers(env)
            version = await published(rt, "bench-templates", templates())
            await asyncio.sleep(2.0)  # workers up
            warm = [await rt.execution.start_run(version, {}, trigger="manual") for _ in range(10)]
            await wait_all(rt, [w.run_id for w in warm], 60)

            walls, sequential = [], []
            for _ in range(LATENCY_RUNS):
                t0 = time.time()
                started = await rt.execution.start_run(version, {"n": 1}, trigger="manual")
                await wait_all(rt, [started.run_id], 30, every=0.002)
                walls.append(await run_wall(rt, started.run_id, t0) * 1000)
                sequential.append(started.run_id)
            hops = [ms for step, ms in await dispatch_latencies(rt, sequential) if step == "t0"]
            figure("load_average", load_average(), "")
            figure("steps_latency_median", statistics.median(walls), "ms")
            figure("steps_latency_p95", percentile(walls, 0.95), "ms")
            figure("steps_queue_hop_median", statistics.median(hops), "ms")

            spy = profiler(workers[0].pid, profile) if profile else None
            xid0, calls0 = await current_xid(rt), await redis_calls(redis.url)
            cpu0 = sum(cpu_seconds(w.pid) for w in workers)
            t0 = time.perf_counter()
            ids = [
                (await rt.execution.start_run(version, {"n": i}, trigger="manual")).run_id
                for i in range(runs)
            ]
            await wait_all(rt, ids, 300)
            elapsed = time.perf_counter() - t0
            cpu = sum(cpu_seconds(w.pid) for w in workers) - cpu0
            writes = await current_xid(rt) - xid0 - 1
            calls1 = await redis_calls(redis.url)
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
                spy.wait(60)
            delta = {k: v - calls0.get(k, 0) for k, v in calls1.items() if v - calls0.get(k, 0)}
            delta.pop("info", None)
            figure("load_average", load_average(), "")
            figure("steps_throughput", runs / elapsed, "runs/s")
            figure("steps_worker_cpu_per_step", cpu / (runs * STEPS) * 1000, "ms")
            figure("steps_pg_transactions_per_run", writes / runs, "xact")
            figure("steps_redis_commands_per_step", sum(delta.values()) / (runs * STEPS), "cmd")
            top = sorted(delta.items(), key=lambda kv: -kv[1])
            print(
                "# redis calls per step:",
                ", ".join(f"{k} {v / (runs * STEPS):.2f}" for k, v in top),
            )
            await rt.close()
        finally:
            stop_processes(workers)
            redis.stop()
            pg.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="throughput runs (max 2,000)")
    parser.add_argument("--profile", help="py-spy speedscope output of worker 1")
    args = parser.parse_args()
    asyncio.run(main(min(max(args.runs, 1), MAX_RUNS), args.profile))
