"""Run start cost against graph size, and the API's liveness meanwhile.

Run standalone from the repository root: ``python bench/limits.py``. It starts its own
embedded PostgreSQL and Redis in a temporary directory, publishes one workflow per size
(a webhook trigger followed by a chain of ``--sizes`` Set nodes, each mapping one field
with an expression), starts ``railyard api`` and ``railyard worker`` as subprocesses, and
for each size:

- posts the webhook ``--starts`` times, one at a time (the first of each size after one
  untimed warm-up call, which loads and caches the graph), and reports the median time
  the API took to answer (``start_api_time_<n>``, its p95 ``start_api_time_p95_<n>`` and
  maximum ``start_api_time_max_<n>``: request sent to 202 received, so the API's whole
  work: parse, compute the start within its inline budget, store the run, hand the rest
  to a worker);
- meanwhile polls ``/health/live`` every 5 ms on another connection and reports its
  median and p99 latency (``health_live_p50_<n>``, ``health_live_p99_<n>``): how long the
  API's event loop was blocked;
- then posts it ``--cpu-starts`` more times without the probe and reports the API
  process's CPU time (all its threads, from /proc) per start (``start_api_cpu_<n>``): less
  sensitive than wall times to the machine's other work;
- waits until every run of that size has succeeded (``run_complete_<n>``: the median
  time from the webhook call to the run's ``finished_at``; the worker's share).

The 1-minute load average of the machine is printed before and after
(``load_average_start``, ``load_average_end``): the machine's other work lengthens every
wall time measured here, so quote it with the figures. Figures are printed as
``figure: <name> = <value> <unit>``. Targets (docs/engine.md, "Limits"): start API time
linear in graph size and under 50 ms at 5,000 nodes;
``/health/live`` p99 under 50 ms throughout. Bounded: every wait has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import Stack  # noqa: E402
from bench.common import cpu_seconds, figure, percentile  # noqa: E402


def chain(size: int) -> dict[str, Any]:
    """Webhook -> ``size`` Set nodes in a chain: ``{"i": 1}``, then each
    ``{"i": <previous i> + 1}``."""
    nodes = [_node("hook", "trigger.webhook", 0, {})]
    edges = []
    previous = "hook"
    for i in range(size):
        nid = f"set_{i}"
        mapping = {"i": "=i + 1" if i else "=1"}  # the webhook's input has no i
        nodes.append(_node(nid, "control.set", i + 1, {"mapping": mapping}))
        edges.append(
            {"id": f"e{i}", "source": previous, "source_port": "out", "target": nid}
            | {"target_port": "in"}
        )
        previous = nid
    return {"nodes": nodes, "edges": edges, "viewport": {"x": 0, "y": 0, "zoom": 1}}


def _node(nid: str, ntype: str, x: int, config: dict[str, Any]) -> dict[str, Any]:
    return {"id": nid, "type": ntype, "label": nid, "position": {"x": x * 10, "y": 0}} | {
        "config": config
    }


async def publish(env: dict[str, str], sizes: list[int]) -> dict[int, tuple[str, str]]:
    """Publish one chain per size; ``size -> (workflow id, webhook token)``."""
    import msgspec

    from backend.runtime import build_runtime
    from backend.services.identity import accounts
    from backend.services.workflows import workflows
    from backend.settings import load_settings
    from designer_schema.diagram import Diagram

    rt = await build_runtime(load_settings(environ=env), pool_size=2)
    found = {}
    try:
        async with rt.sessionmaker() as session, session.begin():
            user = await accounts.create_user(
                session, "limits@example.com", "bench-password-123", role="admin"
            )
        for size in sizes:
            async with rt.sessionmaker() as session, session.begin():
                wf = await workflows.create_workflow(session, f"chain {size}", user.id)
                diagram = msgspec.convert(chain(size), Diagram)
                await workflows.save_draft(session, wf.id, diagram, rt.catalog)
                await workflows.publish(session, wf.id, rt.catalog, user.id)
                found[size] = (str(wf.id), wf.webhook_token)
    finally:
        await rt.close()
    return found


async def finished_after(
    env: dict[str, str], run_ids: list[str], timeout: float
) -> dict[str, float]:
    """Wait until the runs succeeded; run id -> ``finished_at`` as epoch seconds."""
    from sqlalchemy import text

    from backend.db.engine import make_engine

    engine = make_engine(env["DATABASE_URL"], pool_size=1)
    deadline = time.monotonic() + timeout
    try:
        while True:
            async with engine.connect() as conn:
                rows = (
                    await conn.execute(
                        text(
                            "select id::text, status, extract(epoch from finished_at), error"
                            " from runs where id = any(cast(:ids as uuid[]))"
                        ),
                        {"ids": run_ids},
                    )
                ).all()
            if len(rows) == len(run_ids) and all(r[1] == "succeeded" for r in rows):
                return {str(r[0]): float(r[2]) for r in rows}
            ended = [r for r in rows if r[1] in ("failed", "cancelled", "timed_out")]
            if ended:
                raise RuntimeError(f"run {ended[0][0]} ended {ended[0][1]}: {ended[0][3]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"runs not finished after {timeout} s")
            await asyncio.sleep(0.2)
    finally:
        await engine.dispose()


async def measure(
    base: str, token: str, starts: int
) -> tuple[list[float], list[float], list[tuple[str, float]]]:
    """Post the webhook ``starts`` times (after a warm-up) while polling /health/live."""
    health: list[float] = []
    stop = asyncio.Event()

    async def poll(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            sent = time.perf_counter()
            await client.get(f"{base}/health/live")
            health.append(time.perf_counter() - sent)
            await asyncio.sleep(0.005)

    api_times: list[float] = []
    runs: list[tuple[str, float]] = []
    timeout = httpx.Timeout(300.0)
    async with (
        httpx.AsyncClient(timeout=timeout) as hooks,
        httpx.AsyncClient(timeout=timeout) as probe,
    ):
        warm = await hooks.post(f"{base}/hooks/{token}", json={"i": 0})
        warm.raise_for_status()
        runs.append((warm.json()["run_id"], time.time()))
        poller = asyncio.create_task(poll(probe))
        await asyncio.sleep(0.1)
        for _ in range(starts):
            sent_wall, sent = time.time(), time.perf_counter()
            answer = await hooks.post(f"{base}/hooks/{token}", json={"i": 0})
            api_times.append(time.perf_counter() - sent)
            if answer.status_code != 202:
                raise RuntimeError(f"webhook answered {answer.status_code}: {answer.text}")
            runs.append((answer.json()["run_id"], sent_wall))
            await asyncio.sleep(0.2)
        stop.set()
        await poller
    return api_times, health, runs


async def cpu_per_start(base: str, token: str, pid: int, starts: int) -> tuple[float, list[str]]:
    """API process CPU seconds per webhook start over ``starts`` starts (nothing else asks
    it anything meanwhile), and the run ids."""
    runs = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(300.0)) as hooks:
        before = cpu_seconds(pid)
        for _ in range(starts):
            answer = await hooks.post(f"{base}/hooks/{token}", json={"i": 0})
            if answer.status_code != 202:
                raise RuntimeError(f"webhook answered {answer.status_code}: {answer.text}")
            runs.append(answer.json()["run_id"])
            await asyncio.sleep(0.05)
        used = cpu_seconds(pid) - before
    return used / starts, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 1000, 5000])
    parser.add_argument("--starts", type=int, default=30)
    parser.add_argument("--cpu-starts", type=int, default=10)
    args = parser.parse_args()

    figure("load_average_start", os.getloadavg()[0], "1m")
    with Stack("railyard-limits-") as stack:
        env = stack.env
        published = asyncio.run(publish(env, args.sizes))
        api, base = stack.api()
        stack.spawn("worker", "worker")
        for size in args.sizes:
            _, token = published[size]
            api_times, health, runs = asyncio.run(measure(base, token, args.starts))
            cpu, cpu_runs = asyncio.run(cpu_per_start(base, token, api.pid, args.cpu_starts))
            finished = asyncio.run(finished_after(env, [r for r, _ in runs] + cpu_runs, 600))
            figure(f"start_api_time_{size}", statistics.median(api_times) * 1000, "ms")
            figure(f"start_api_time_p95_{size}", percentile(api_times, 0.95) * 1000, "ms")
            figure(f"start_api_time_max_{size}", max(api_times) * 1000, "ms")
            figure(f"start_api_cpu_{size}", cpu * 1000, "ms")
            figure(f"health_live_p50_{size}", statistics.median(health) * 1000, "ms")
            figure(f"health_live_p99_{size}", percentile(health, 0.99) * 1000, "ms")
            complete = [finished[run_id] - sent for run_id, sent in runs[1:]]
            figure(f"run_complete_{size}", statistics.median(complete) * 1000, "ms")
        figure("load_average_end", os.getloadavg()[0], "1m")


if __name__ == "__main__":
    main()
