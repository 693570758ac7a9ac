"""Scale-out benchmark: throughput and per-run costs with 1, 2, 4 workers and 1, 2 APIs.

Run from the repository root: ``python bench/scale.py`` (``--quick`` for a smoke run,
``--json scale.json`` to keep the figures for ``bench/capacity.py --costs scale.json``).
It starts embedded PostgreSQL (durable) and Redis (bench/cluster.py), measures the
PostgreSQL commit ceiling with ``pgbench -N`` on that server, publishes two workflows and
drives each through ``railyard api`` webhooks (the lean load generator of
bench/webhooks.py, ``--connections`` keep-alive connections) for every configuration of
``--configs`` (``<workers>x<apis>``):

- ``action3``: Webhook -> three HTTP Request steps against a local endpoint answering at
  once (bench/endpoint.py): every step goes through a worker;
- ``webhook``: Webhook -> Set -> If: the API evaluates the flow steps inline and ends the
  run itself, no worker involved.

Each phase sends ``--runs`` requests (or stops after ``--seconds``) and waits until every
run it started ended. Per configuration it prints ``figure:`` lines: runs/s (runs ended /
first created to last finished), CPU ms per run per process kind (api, worker, pg = every
PostgreSQL server process, redis, endpoint, generator = this process), PostgreSQL commits
and write transactions per run, WAL bytes per run, Redis commands per run (also net of the
commands an idle cluster sends per second, measured for 11 s before the phase), and a
``bottleneck:`` line naming the most saturated resource with the evidence. On a machine
with few cores more processes cannot add CPU: when the machine's cores are all busy the
bottleneck line says so, and the per-run costs (load-insensitive) are the result.

Bounded: at most ``--runs`` requests per phase, ``--seconds`` of load, 180 s of drain and
twice 11 s for PostgreSQL's statistics to settle (before and after).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.workers.worker import loop_factory
from bench.capacity import Costs
from bench.cluster import Cost, Meter, Stack
from bench.common import figure, load_average, pgbench_ceiling
from bench.engine import Endpoint, chain
from bench.webhooks import load_raw, pipeline, setup

ACTION_STEPS = 3
DRAIN_SECONDS = 180.0
STATS_SETTLE_SECONDS = 11.0
"""Wait before reading ``pg_stat_database.xact_commit``: a backend that flushed its
statistics less than a second ago flushes the rest only after 10 idle seconds
(PostgreSQL's ``PGSTAT_IDLE_INTERVAL``, src/backend/utils/activity/pgstat.c)."""
KINDS = ("api", "worker", "pg", "redis", "endpoint", "generator")


def parse_configs(text: str) -> list[tuple[int, int]]:
    """``"1x1,2x1"`` -> ``[(1, 1), (2, 1)]`` (workers, apis)."""
    configs = []
    for part in text.split(","):
        workers, _, apis = part.strip().partition("x")
        configs.append((int(workers), int(apis)))
    return configs


async def drain(meter: Meter, since: Any, expected: int) -> tuple[int, int, float]:
    """Wait until the ``expected`` runs created since ``since`` (a PostgreSQL timestamp)
    ended; ``(succeeded, failed or other end, seconds from first created to last finished)``.

    Raises TimeoutError after :data:`DRAIN_SECONDS`."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while True:
        row = await meter.fetchrow(
            "select count(*), count(*) filter (where status = 'succeeded'),"
            " count(*) filter (where status in ('failed', 'cancelled', 'timed_out')),"
            " extract(epoch from max(finished_at) - min(created_at))"
            " from runs where created_at >= $1",
            since,
        )
        total, ok, bad, span = row
        if total >= expected and ok + bad == total:
            return ok, bad, float(span or 0.0)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{total - ok - bad} of {total} runs still running")
        await asyncio.sleep(0.25)


async def idle_redis_rate(meter: Meter, seconds: float) -> float:
    """Redis commands per second the cluster sends with nothing to do (idle workers looking
    at the queue, the scheduler's timers): a cost per second, not per run, taken out of
    the per-run figure the capacity model uses."""
    before = await meter.read()
    await asyncio.sleep(seconds)
    after = await meter.read()
    return max(0, after.redis_calls - before.redis_calls - 2) / (after.wall - before.wall)


def bottleneck(cost: Cost, active: float, ceiling: float) -> tuple[str, str]:
    """``(name, evidence)`` of the most saturated resource over ``active`` seconds: a
    Python process is saturated at one core, Redis at one core, PostgreSQL at the
    ``pgbench -N`` commit rate ``ceiling``, the machine at all its cores."""
    saturation: dict[str, float] = {}
    evidence = []
    for kind in ("worker", "api", "generator"):
        n = cost.processes.get(kind, 0)
        if n:
            saturation[f"{kind} CPU"] = cost.cpu_max[kind] / active
            evidence.append(f"{kind} CPU {cost.cpu[kind] / active / n:.0%} of a core x{n}")
    commits = cost.commits / active
    saturation["PostgreSQL commits"] = commits / ceiling
    evidence.append(f"PG {commits:.0f} commits/s = {commits / ceiling:.0%} of pgbench ceiling")
    evidence.append(f"PG CPU {cost.cpu['pg'] / active:.2f} cores")
    saturation["Redis CPU"] = cost.cpu["redis"] / active
    evidence.append(f"Redis {saturation['Redis CPU']:.0%} of a core")
    saturation["machine CPU"] = cost.machine_cores / cost.cores
    ours = sum(cost.cpu.values()) / active
    evidence.append(
        f"machine {cost.machine_cores:.2f} of {cost.cores} cores busy, {ours:.2f} of them"
        f" this benchmark's processes (load {load_average():.1f})"
    )
    name = max(saturation, key=saturation.__getitem__)
    note = ""
    if name == "machine CPU":
        note = "; more processes cannot add CPU here: per-run costs are the result"
    return name, f"{name} {saturation[name]:.0%}{note} ({'; '.join(evidence)})"


async def phase(
    cluster: Stack, meter: Meter, urls: list[str], args: argparse.Namespace, ceiling: float
) -> dict[str, Any]:
    """One measured phase: ``args.runs`` webhook requests spread over ``urls``; its figures
    as a dict (per-run costs, runs/s, bottleneck)."""
    await load_raw(urls, args.connections, 30, limit=10)  # warm-up: connections, caches
    await drain(meter, await meter.conn.fetchval("select now() - interval '1 minute'"), 10)
    since = await meter.conn.fetchval("select clock_timestamp()")
    # idle long enough for every backend to report the warm-up's commits before "before"
    idle = await idle_redis_rate(meter, STATS_SETTLE_SECONDS)
    polls = meter.polls
    before = await meter.read()
    load = await load_raw(urls, args.connections, args.seconds, limit=args.runs)
    accepted = load["codes"].get(202, 0)
    ok, bad, span = await drain(meter, since, accepted)
    after = await meter.read()
    await asyncio.sleep(STATS_SETTLE_SECONDS)
    settled = await meter.read()
    cost = meter.cost(before, after, meter.polls - polls, settled)
    runs = ok + bad
    name, evidence = bottleneck(cost, cost.wall, ceiling)
    return {
        "runs": runs,
        "failed": bad,
        "errors": load["errors"],
        "runs_per_s": runs / span if span > 0 else 0.0,
        "accepted_per_s": accepted / load["elapsed"],
        "cpu_ms_per_run": {k: cost.cpu.get(k, 0.0) / runs * 1000 for k in KINDS},
        "commits_per_run": cost.commits / runs,
        "writes_per_run": cost.writes / runs,
        "wal_bytes_per_run": cost.wal_bytes / runs,
        "redis_calls_per_run": cost.redis_calls / runs,
        "redis_idle_calls_per_s": idle,
        "redis_net_calls_per_run": max(0.0, cost.redis_calls - idle * cost.wall) / runs,
        "bottleneck": name,
        "evidence": evidence,
    }


def publish(result: dict[str, Any], prefix: str) -> None:
    """Print a phase's figure lines and its bottleneck line."""
    figure(f"{prefix}_runs_per_s", result["runs_per_s"], "runs/s")
    figure(f"{prefix}_accepted_per_s", result["accepted_per_s"], "req/s")
    figure(f"{prefix}_runs", result["runs"], "runs")
    figure(f"{prefix}_failed_runs", result["failed"], "runs")
    figure(f"{prefix}_request_errors", result["errors"], "requests")
    for kind, ms in result["cpu_ms_per_run"].items():
        figure(f"{prefix}_{kind}_cpu_per_run", ms, "ms")
    figure(f"{prefix}_pg_commits_per_run", result["commits_per_run"], "commits")
    figure(f"{prefix}_pg_write_xacts_per_run", result["writes_per_run"], "xact")
    figure(f"{prefix}_wal_bytes_per_run", result["wal_bytes_per_run"], "B")
    figure(f"{prefix}_redis_commands_per_run", result["redis_calls_per_run"], "commands")
    figure(f"{prefix}_redis_idle_commands", result["redis_idle_calls_per_s"], "commands/s")
    figure(f"{prefix}_redis_net_commands_per_run", result["redis_net_calls_per_run"], "commands")
    print(f"bottleneck: {prefix}: {result['evidence']}", flush=True)


def derive_costs(results: list[dict[str, Any]]) -> Costs:
    """Per-start and per-action-step costs for bench/capacity.py: a start costs what a
    ``webhook`` run costs (its inline Set and If included); an action step costs a third of
    what an ``action3`` run costs beyond that. Medians over the configurations."""

    def median(workload: str, pick: Any) -> float:
        return statistics.median(pick(r) for r in results if r["workload"] == workload)

    def pair(pick: Any) -> tuple[float, float]:
        start = median("webhook", pick)
        return start, max(0.0, (median("action3", pick) - start) / ACTION_STEPS)

    def cpu(kind: str) -> tuple[float, float]:
        return pair(lambda r: r["cpu_ms_per_run"][kind])

    api, _ = cpu("api")
    worker_start, worker_step = cpu("worker")
    pg_start, pg_step = cpu("pg")
    commits = pair(lambda r: r["commits_per_run"])
    wal = pair(lambda r: r["wal_bytes_per_run"])
    redis = pair(lambda r: r["redis_net_calls_per_run"])
    return Costs(
        api_cpu_ms_per_start=api,
        worker_cpu_ms_per_start=worker_start,
        worker_cpu_ms_per_step=worker_step,
        pg_cpu_ms_per_start=pg_start,
        pg_cpu_ms_per_step=pg_step,
        pg_commits_per_start=commits[0],
        pg_commits_per_step=commits[1],
        wal_bytes_per_start=wal[0],
        wal_bytes_per_step=wal[1],
        redis_calls_per_start=redis[0],
        redis_calls_per_step=redis[1],
    )


async def measure(cluster: Stack, args: argparse.Namespace) -> dict[str, Any]:
    """The whole benchmark on a started ``cluster``; everything it printed, as a dict."""
    ceiling = await asyncio.to_thread(pgbench_ceiling, cluster.pg, 4, args.pgbench_seconds)
    figure("pgbench_N_tps", ceiling, "tps")
    endpoint = Endpoint(0.0)
    cluster.adopt("endpoint", endpoint.pid)
    cluster.adopt("generator", os.getpid())
    workflows = {
        "action3": msgspec.to_builtins(chain(ACTION_STEPS, endpoint.url, "trigger.webhook")),
        "webhook": pipeline(),
    }
    tokens = {name: await setup(cluster.env, d) for name, d in workflows.items()}
    meter = await Meter.open(cluster)
    results = []
    try:
        for workers, apis in args.configs:
            procs = len(cluster.procs)
            bases = [(await asyncio.to_thread(cluster.api))[1] for _ in range(apis)]
            for _ in range(workers):
                await asyncio.to_thread(cluster.worker)
            started = cluster.procs[procs:]
            try:
                for workload, token in tokens.items():
                    urls = [f"{base}/hooks/{token}" for base in bases]
                    result = await phase(cluster, meter, urls, args, ceiling)
                    publish(result, f"{workload}_w{workers}_a{apis}")
                    results.append({"workload": workload, "workers": workers, "apis": apis})
                    results[-1].update(result)
            finally:
                await asyncio.to_thread(cluster.stop, started)
    finally:
        await meter.close()
        endpoint.shutdown()
    costs = derive_costs(results)
    for key, value in asdict(costs).items():
        figure(f"model_{key}", value, "")
    return {
        "load_average": load_average(),
        "cores": os.cpu_count(),
        "pgbench_tps": ceiling,
        "configs": results,
        "costs": asdict(costs),
    }


def main() -> int:
    """Parse flags, run the benchmark, print figures (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="1x1,2x1,4x1,1x2,2x2,4x2", type=parse_configs)
    parser.add_argument("--runs", type=int, default=1000, help="requests per phase")
    parser.add_argument("--seconds", type=float, default=60.0, help="load per phase at most")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--pgbench-seconds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures and costs here")
    parser.add_argument("--quick", action="store_true", help="2 configs, 150 runs, 20 s each")
    args = parser.parse_args()
    if args.quick:
        args.configs, args.runs, args.seconds = parse_configs("1x1,2x2"), 150, 20.0
        args.pgbench_seconds = 3
    print(f"# load average at start: {load_average():.2f} on {os.cpu_count()} cores", flush=True)
    allow_local = {"RAILYARD_HTTP_ALLOW_PRIVATE": "1"}  # HTTP steps call a local endpoint
    with Stack(env=allow_local) as cluster, asyncio.Runner(loop_factory=loop_factory()) as runner:
        found = runner.run(measure(cluster, args))
    print(f"# load average at end: {load_average():.2f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
