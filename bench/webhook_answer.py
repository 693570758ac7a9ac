"""A webhook that answers with its run's last step: the durable 3-step scenario of issue 15.

Starts embedded PostgreSQL and Redis, migrates, publishes Webhook -> three Text template
action steps (durable, run by workers) with the webhook's ``respond`` mode ``last_step``,
then runs ``railyard api`` and ``--workers`` (2) ``railyard worker`` processes and sends
``--runs`` (100) requests one after another on one keep-alive connection, each answered
with the last step's output.

Figures (``figure: <name> = <value> <unit>``):

- ``answer_latency_p50`` / ``_p95`` / ``_p99``: request sent to answer read (ms);
- ``answer_lag_p50`` / ``_p99``: from the moment the run's end was written (its
  ``run.succeeded`` event, stamped by PostgreSQL with ``clock_timestamp()`` just before the
  worker's commit) to the moment the answer was read by the client: the commit, the notice
  to the waiting webhook, its read of the run and the HTTP answer (ms, same machine clock);
- ``answer_api_cpu_per_run``, ``answer_worker_cpu_per_run``: CPU ms per run of the API and
  of all workers; ``answer_redis_commands_per_run``, ``answer_pg_commits_per_run``,
  ``answer_pg_writes_per_run``: counts per run (insensitive to the machine's load);
- ``answer_errors``: answers other than 200 with the expected text; ``load_average_1m``.

Bounded: ``--runs`` requests to 127.0.0.1, each waiting at most 30 s (the webhook answers 202
after 20 s without the run's end).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backend.workers.worker import loop_factory  # noqa: E402
from bench.cluster import Stack  # noqa: E402
from bench.common import (  # noqa: E402
    cpu_seconds,
    figure,
    load_average,
    percentile,
    pg_counters,
    read_response,
    redis_commands,
)
from bench.webhooks import edge, node, setup  # noqa: E402


def three_steps() -> dict[str, Any]:
    """Webhook (answers with the last step) -> template -> template -> template."""

    steps = [node(f"t{i}", "data.template", 200 * i, template=f"step {i}") for i in (1, 2, 3)]
    hook = node("hook", "trigger.webhook", 0, respond="last_step", wait_timeout=20)
    ids = ["hook", "t1", "t2", "t3"]
    return {
        "nodes": [hook, *steps],
        "edges": [edge(a, b) for a, b in itertools.pairwise(ids)],
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


async def sequential(
    url: str, runs: int, body: bytes = b'{"n": %d}'
) -> tuple[list[float], list[float], int]:
    """``runs`` POSTs one after another of ``body`` (JSON; ``%d`` is the request's index):
    ``(latencies s, receipt wall times, errors)``; an error is an answer other than 200."""
    parsed = url.removeprefix("http://")
    hostport, _, path = parsed.partition("/")
    host, _, port = hostport.partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    latencies: list[float] = []
    received: list[float] = []
    errors = 0
    try:
        for i in range(runs):
            sent = body % i
            request = (
                f"POST /{path} HTTP/1.1\r\nHost: {hostport}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(sent)}\r\n\r\n"
            ).encode() + sent
            t0 = time.perf_counter()
            writer.write(request)
            async with asyncio.timeout(30):
                status, _ = await read_response(reader)
            latencies.append(time.perf_counter() - t0)
            received.append(time.time())
            if status != 200:
                errors += 1
    finally:
        writer.close()
    return latencies, received, errors


async def run_ends(env: dict[str, str]) -> list[tuple[float, str]]:
    """``(run.succeeded write time as epoch seconds, status)`` of every webhook run, in
    creation order (NaN for a run that did not succeed)."""
    from sqlalchemy import text

    from backend.db.engine import make_engine

    engine = make_engine(env["DATABASE_URL"], pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "select extract(epoch from e.created_at), r.status from runs r"
                    " left join events e on e.run_id = r.id and e.kind = 'run.succeeded'"
                    " where r.trigger = 'webhook' order by r.created_at"
                )
            )
            return [(float(at) if at is not None else float("nan"), s) for at, s in rows]
    finally:
        await engine.dispose()


async def counters(env: dict[str, str]) -> tuple[int, int, int]:
    """``(PostgreSQL commits, transaction ids, Redis commands)`` so far."""
    commits, xid = await pg_counters(env["DATABASE_URL"])
    return commits, xid, await redis_commands(env["REDIS_URL"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=10, help="requests before measuring")
    args = parser.parse_args()

    with Stack() as stack:
        env = stack.env
        token = asyncio.run(setup(env, three_steps()))
        api, base = stack.api()
        workers = [stack.spawn(f"worker{i}", "worker") for i in range(args.workers)]
        url = f"{base}/hooks/{token}"
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(sequential(url, args.warmup))
            time.sleep(1.0)  # the statistics collector flushes at most once a second
            before = asyncio.run(counters(env))
            cpu_api, cpu_workers = cpu_seconds(api.pid), sum(cpu_seconds(w.pid) for w in workers)
            lat, received, errors = runner.run(sequential(url, args.runs))
            cpu_api = cpu_seconds(api.pid) - cpu_api
            cpu_workers = sum(cpu_seconds(w.pid) for w in workers) - cpu_workers
        time.sleep(1.0)
        after = asyncio.run(counters(env))
        ends = asyncio.run(run_ends(env))[args.warmup :]
        lags = [
            (got - end) * 1000
            for got, (end, status) in zip(received, ends, strict=False)
            if status == "succeeded"
        ]
        runs = max(1, len(lat))
        figure("answer_latency_p50", percentile(lat, 0.50) * 1000, "ms")
        figure("answer_latency_p95", percentile(lat, 0.95) * 1000, "ms")
        figure("answer_latency_p99", percentile(lat, 0.99) * 1000, "ms")
        figure("answer_lag_p50", percentile(lags, 0.50), "ms")
        figure("answer_lag_p99", percentile(lags, 0.99), "ms")
        figure("answer_api_cpu_per_run", cpu_api / runs * 1000, "ms")
        figure("answer_worker_cpu_per_run", cpu_workers / runs * 1000, "ms")
        figure("answer_redis_commands_per_run", (after[2] - before[2]) / runs, "commands")
        figure("answer_pg_commits_per_run", (after[0] - before[0]) / runs, "xact")
        figure("answer_pg_writes_per_run", (after[1] - before[1]) / runs, "xact")
        figure("answer_errors", errors + (len(ends) - len(lags)), "runs")
        figure("load_average_1m", load_average(), "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
