"""Cost of the queue hop alone: arq's job pickup against the lean one, paired, no database.

Run standalone from the repository root: ``python bench/pickup.py`` (``--jobs N`` sets
the flood size, at most 20,000). It starts its own embedded Redis in a temporary
directory and, in this one process, runs the same worker twice: a
:class:`~backend.workers.wake.WakeableWorker` with the lean pickup (one atomic script
call per take, backend/workers/pickup.py) and the same class with arq 0.28's pickup
restored (``_poll_iteration`` and ``start_jobs`` / ``run_job``: WATCH, EXISTS, ZSCORE,
MULTI/PSETEX/EXEC, GET, INCR, EXPIRE, DEL, ZREM per job). The job is a no-op named
``execute_step`` enqueued by the real dispatcher (:class:`~backend.transport.dispatch.
ArqDispatcher`: job + wake-up in one MULTI), so only the queue hop is measured. Figures,
``<name>_arq`` and ``<name>_lean``:

- ``pickup_hop_median``: 200 sequential jobs, ms from just before the enqueue to the job
  function's start (enqueue, wake-up, take, start), median.
- ``pickup_cpu_per_job``: ``--jobs`` jobs (default 5,000) enqueued first, then run by one
  worker (``max_jobs`` 20): this process's CPU per job, enqueue included (the same for
  both), in ms.
- ``pickup_redis_commands_per_job``: Redis ``INFO commandstats`` calls per job over the
  flood, enqueue and commands run inside scripts included.
- ``pickup_jobs_per_second``: the flood's jobs per second (wall time: quote the load
  average printed beside it).

Bounded: at most 200 + 20,000 jobs per pickup, every wait has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arq.worker import Worker, func

from backend.embedded import EmbeddedRedis
from backend.services.runs.channels import WAKE_CHANNEL
from backend.transport.dispatch import ArqDispatcher
from backend.transport.redis_client import RedisTarget, arq_redis_settings, redis_client
from backend.workers.wake import WakeableWorker
from backend.workers.worker import stop_worker
from bench.common import figure, load_average

SEQUENTIAL = 200
MAX_JOBS = 20_000
TIMEOUT_SECONDS = 120.0


class ArqPickupWorker(WakeableWorker):
    """The same worker (wake-ups, outage handling) with arq 0.28's own pickup."""

    _poll_iteration = Worker._poll_iteration


class Probe:
    """The no-op job: records when each job started and signals the waiters."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self.changed = asyncio.Event()

    async def execute_step(self, ctx: dict[str, Any], run_id: str, step_id: str) -> None:
        self.started.append(time.perf_counter())
        self.changed.set()

    async def until(self, count: int) -> None:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            while len(self.started) < count:
                self.changed.clear()
                await self.changed.wait()


async def _commands(pool: Any) -> int:
    stats = await pool.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


async def measure(kind: str, cls: type[WakeableWorker], url: str, jobs: int) -> None:
    """Print the figures of one pickup (``kind``: figure suffix) on the Redis at ``url``."""
    target = RedisTarget(url)
    pool = redis_client(target)
    await pool.flushall()
    dispatcher = ArqDispatcher(pool)
    probe = Probe()
    worker = cls(
        functions=[func(probe.execute_step, name="execute_step", max_tries=1)],
        redis_settings=arq_redis_settings(target),
        redis_target=target,
        handle_signals=False,
        keep_result=0,
        poll_delay=0.005,
        max_jobs=20,
    )
    task = asyncio.create_task(worker.async_run())
    try:
        hops = []
        for i in range(SEQUENTIAL):
            t0 = time.perf_counter()
            await dispatcher.dispatch_step("run", f"s{i}")
            await probe.until(i + 1)
            hops.append((probe.started[-1] - t0) * 1000)
            await asyncio.sleep(0.002)  # the worker goes back to sleep on the wake-up channel
        figure(f"pickup_hop_median_{kind}", statistics.median(hops), "ms")

        worker.allow_pick_jobs = False  # queue the flood first, then let the worker at it
        calls0, cpu0 = await _commands(pool), time.process_time()
        for i in range(jobs):
            await dispatcher.dispatch_step("run", f"f{i}")
        t0 = time.perf_counter()
        worker.allow_pick_jobs = True
        await pool.publish(WAKE_CHANNEL, b"")  # wake it now rather than at idle_poll
        await probe.until(SEQUENTIAL + jobs)
        elapsed = time.perf_counter() - t0
        running = [t for t in worker.tasks.values() if not t.done()]
        if running:  # arq's finish_job writes after the job function returned
            await asyncio.wait(running, timeout=TIMEOUT_SECONDS)
        cpu, calls = time.process_time() - cpu0, await _commands(pool) - calls0
        figure("load_average", load_average(), "")
        figure(f"pickup_jobs_per_second_{kind}", jobs / elapsed, "jobs/s")
        figure(f"pickup_cpu_per_job_{kind}", cpu / jobs * 1000, "ms")
        figure(f"pickup_redis_commands_per_job_{kind}", calls / jobs, "cmd")
    finally:
        await stop_worker(worker)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await pool.aclose()


async def main(jobs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="railyard-bench-") as tmp:
        redis = EmbeddedRedis(Path(tmp) / "redis")
        redis.start()
        try:
            for kind, cls in (("arq", ArqPickupWorker), ("lean", WakeableWorker)):
                await measure(kind, cls, redis.url, jobs)
        finally:
            redis.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="flood jobs (max 20,000)")
    args = parser.parse_args()
    asyncio.run(main(min(max(args.jobs, 1), MAX_JOBS)))
