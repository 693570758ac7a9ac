"""The Code step's cost, and the API's responsiveness while Code steps burn their CPU.

(a) In this process, through the action exactly as a worker runs it (its sandbox
processes, ``code.processes`` = 2): ``--steps`` (300) steps of a trivial script
(``return input``) and of a 1 ms script (a busy loop of 1 ms), one at a time and then
two at a time, beside the same number of Limit steps (a Data node doing nothing worth
measuring) for the baseline. Figures: steps/s (sequential and 2 in flight), p50/p99 of a
step's time, and the latency a Code step adds (its p50/p99 minus the baseline's).

(b) On the embedded stack (bench/cluster.py: one ``railyard api``, one ``railyard
worker``, CPU limit 200 ms): a published Webhook -> Code step whose script loops forever;
``--runs`` (100) webhook posts at once, so every run hits the CPU limit; meanwhile a probe
in a process of its own asks ``GET /health/live`` every 20 ms. Figures: /health/live
p50/p99/max during the load and idle before it (target: p99 under 50 ms), when the
slowest answer came, the runs that failed with ``code_cpu_limit``, and the wall time
until all ended. Bounded: 240 s of waiting, requests only to 127.0.0.1.

Run: ``python bench/code_step.py`` (``--quick``: 100 steps, 30 runs).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import Stack  # noqa: E402
from bench.common import figure, load_average, percentile  # noqa: E402
from bench.webhooks import edge, node, setup  # noqa: E402

TARGET_P99_MS = 50.0
TRIVIAL = "return input;"
ONE_MS = "const end = Date.now() + 1;\nwhile (Date.now() < end) {}\nreturn input;"
LOOP = "while (true) {}"
SETTINGS = {"code.processes": 2, "code.cpu_limit_ms": 5000}


async def timed(action: Any, config: dict[str, Any], count: int, in_flight: int) -> list[float]:
    """Seconds per step of ``count`` steps, ``in_flight`` at a time."""
    from connectors.testing import ActionTestEnvironment

    env = ActionTestEnvironment(settings=SETTINGS)
    times: list[float] = []
    queue = list(range(count))

    async def lane() -> None:
        while queue:
            queue.pop()
            t0 = time.perf_counter()
            await env.run(action, config, {"n": 1})
            times.append(time.perf_counter() - t0)

    await asyncio.gather(*(lane() for _ in range(in_flight)))
    return times


async def sandbox(steps: int) -> None:
    from connectors.builtin import code, data_lists

    await timed(code.javascript, {"code": TRIVIAL}, 20, 2)  # start both processes
    base = await timed(data_lists.limit, {"items": [1, 2, 3]}, steps, 1)
    base_p50, base_p99 = percentile(base, 0.5), percentile(base, 0.99)
    figure("baseline_step_p50", base_p50 * 1000, "ms")
    for name, source in (("trivial", TRIVIAL), ("1ms", ONE_MS)):
        seq = await timed(code.javascript, {"code": source}, steps, 1)
        t0 = time.perf_counter()
        await timed(code.javascript, {"code": source}, steps, 2)
        wall = time.perf_counter() - t0
        figure(f"{name}_steps_per_s_sequential", len(seq) / sum(seq), "steps/s")
        figure(f"{name}_steps_per_s_2_in_flight", steps / wall, "steps/s")
        figure(f"{name}_step_p50", percentile(seq, 0.5) * 1000, "ms")
        figure(f"{name}_step_p99", percentile(seq, 0.99) * 1000, "ms")
        figure(f"{name}_added_p50", (percentile(seq, 0.5) - base_p50) * 1000, "ms")
        figure(f"{name}_added_p99", (percentile(seq, 0.99) - base_p99) * 1000, "ms")
        figure(f"{name}_step_mean", statistics.fmean(seq) * 1000, "ms")


def loop_diagram() -> dict[str, Any]:
    """Webhook (answers 202 at once) -> a Code step looping until its CPU limit."""
    return {
        "nodes": [
            node("hook", "trigger.webhook", 0),
            node("spin", "code.javascript", 200, code=LOOP),
        ],
        "edges": [edge("hook", "spin")],
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


async def ended_runs(env: dict[str, str]) -> dict[str, int]:
    """Runs by status, and the Code step failures by error kind."""
    import asyncpg

    url = env["DATABASE_URL"].replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("select status, count(*) from runs group by status")
        kinds = await conn.fetch(
            "select error->>'kind' as kind, count(*) from attempts"
            " where error is not null group by 1"
        )
    finally:
        await conn.close()
    return {**{r[0]: r[1] for r in rows}, **{f"error_{r[0]}": r[1] for r in kinds}}


def probe_process(base: str, started: Any, stop: Any, out: Any) -> None:
    """In a process of its own: ``GET /health/live`` every 20 ms until ``stop`` is set
    (``started`` set after the first answer); puts ``[(monotonic time of the answer,
    latency ms), ...]`` on ``out``.

    Its own process, so that what the bench itself does meanwhile (posting the webhook
    burst, polling PostgreSQL) never delays a probe and is never counted as the API's."""
    found: list[tuple[float, float]] = []
    with httpx.Client(base_url=base, timeout=30, trust_env=False) as client:
        while not stop.is_set():
            t0 = time.perf_counter()
            client.get("/health/live").raise_for_status()
            found.append((time.monotonic(), (time.perf_counter() - t0) * 1000))
            started.set()
            stop.wait(0.02)
    out.put(found)


class Probe:
    """:func:`probe_process` started now; :meth:`finish` stops it and returns its samples."""

    def __init__(self, base: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.started = ctx.Event()
        self.stop = ctx.Event()
        self.out = ctx.Queue()
        args = (base, self.started, self.stop, self.out)
        self.proc = ctx.Process(target=probe_process, args=args)
        self.proc.start()

    async def ready(self) -> Probe:
        """Wait (up to 60 s) until the probe has its first answer."""
        if not await asyncio.to_thread(self.started.wait, 60):
            raise TimeoutError("the /health/live probe process did not start")
        return self

    async def finish(self) -> list[tuple[float, float]]:
        self.stop.set()
        found: list[tuple[float, float]] = await asyncio.to_thread(self.out.get, True, 60)
        await asyncio.to_thread(self.proc.join, 10)
        return found


def report(phase: str, samples: list[tuple[float, float]], since: float | None = None) -> None:
    ms = [latency for _, latency in samples]
    figure(f"live_{phase}_p50", percentile(ms, 0.5), "ms")
    figure(f"live_{phase}_p99", percentile(ms, 0.99), "ms")
    figure(f"live_{phase}_max", max(ms), "ms")
    figure(f"live_{phase}_samples", len(ms), "requests")
    if since is not None:
        at, _ = max(samples, key=lambda s: s[1])
        figure(f"live_{phase}_max_at", at - since, "s after the first post")


async def api_under_load(stack: Stack, runs: int) -> None:
    token = await setup(stack.env, loop_diagram())
    _, base = stack.api()
    stack.worker()
    idle = await Probe(base).ready()
    await asyncio.sleep(5)
    report("idle", await idle.finish())
    loaded = await Probe(base).ready()
    t0 = time.perf_counter()
    since = time.monotonic()
    async with httpx.AsyncClient(base_url=base, timeout=60, trust_env=False) as client:
        answers = await asyncio.gather(
            *(client.post(f"/hooks/{token}", json={"k": k}) for k in range(runs))
        )
    figure("webhook_posts_accepted", sum(a.status_code < 300 for a in answers), "requests")
    figure("webhook_posts_wall", time.perf_counter() - t0, "s")
    counts: dict[str, int] = {}
    while time.perf_counter() - t0 < 240:
        counts = await ended_runs(stack.env)
        if sum(counts.get(s, 0) for s in ("failed", "succeeded")) >= runs:
            break
        await asyncio.sleep(0.5)
    figure("all_runs_ended_wall", time.perf_counter() - t0, "s")
    report("loaded", await loaded.finish(), since)
    figure("runs_failed", counts.get("failed", 0), "runs")
    figure("steps_failed_code_cpu_limit", counts.get("error_code_cpu_limit", 0), "steps")
    figure("target_p99", TARGET_P99_MS, "ms")
    figure("load_average_1m", load_average(), "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="100 steps, 30 runs")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.runs = 100, 30
    asyncio.run(sandbox(args.steps))
    env = {"RAILYARD_CODE_CPU_LIMIT_MS": "200", "RAILYARD_CODE_PROCESSES": "2"}
    with Stack("railyard-bench-code-", env=env) as stack:
        asyncio.run(api_under_load(stack, args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
