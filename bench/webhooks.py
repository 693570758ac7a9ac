"""Webhook ingestion and scheduler fire lag, measured the production way.

Starts embedded PostgreSQL and Redis, migrates, publishes Webhook -> Set -> If, then runs
``railyard api`` (``--api-procs`` processes on their own ports) and ``railyard worker`` as
subprocesses, and drives the webhook from a loopback load generator (``--client raw``: lean HTTP/1.1
sockets, like wrk, the default; ``--client httpx``: httpx clients): ``--connections``
(16) concurrent keep-alive connections for ``--seconds`` (60), each request a distinct JSON
body. Then ``railyard scheduler`` fires an every-second schedule for ``--lag-seconds``
(600) and the fire lag (``schedule_fires.lag_ms``: start of the run minus the fire instant)
is read back.

Figures (``figure: <name> = <value> <unit>``): accepted requests/s (202 answers), errors
(anything else, or a failed request), p50/p99 latency (ms), runs stored and runs completed,
the cost of a request on the server side (the API processes' CPU ms per accepted request,
PostgreSQL transactions and write transactions per run, Redis commands per run: counts, so
insensitive to the machine's load), PostgreSQL's share of the load phase
(bench/pg_share.py: ``webhook_pg_cpu_per_run``, WAL records and bytes, row locks, per table
HOT shares), scheduler fire lag p50/p99 (ms) and fires, and the 1-minute load average beside
them. ``--quick`` shortens both phases for a smoke run.

``--pair DIR`` compares this checkout with another one (``DIR``: e.g. ``git archive main |
tar -x -C DIR``) on one stack: one API process each (the other's code first on
``PYTHONPATH``), load alternated between them in ``--pair-bursts`` bursts of
``--pair-requests`` requests (the order swapped every burst), so both meet the same
machine load; it prints each side's API CPU ms per request (median of the bursts), their
ratio per burst (median) and the p50/p99 latency over all bursts.

``--url URL`` drives the same load generator against another server (a peer such as
Node-RED answering 202 on the same machine) and prints only the load figures, so both are
measured the same way. Bounded: requests only go to 127.0.0.1 (or ``--url``) and stop after
the given seconds. ``--profile DIR`` adds 10 s of load with py-spy on the API processes and
prints where their CPU went (bench/peers/profile.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backend.workers.worker import loop_factory  # noqa: E402
from bench import pg_share  # noqa: E402
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


async def setup(env: dict[str, str], diagram: dict[str, Any]) -> str:
    """Create a user and publish ``diagram``; returns the webhook token."""
    import msgspec

    from backend.runtime import build_runtime
    from backend.services.identity import accounts
    from backend.services.workflows import workflows
    from backend.settings import load_settings
    from designer_schema.diagram import Diagram

    settings = load_settings(environ=env)
    rt = await build_runtime(settings, pool_size=2)
    try:
        async with rt.sessionmaker() as session, session.begin():
            user = await accounts.create_user(
                session, f"bench{time.time_ns()}@example.com", "bench-password-123", role="admin"
            )
            wf = await workflows.create_workflow(session, "bench", user.id)
            await workflows.save_draft(
                session, wf.id, msgspec.convert(diagram, Diagram), rt.catalog
            )
            await workflows.publish(session, wf.id, rt.catalog, user.id)
            return wf.webhook_token
    finally:
        await rt.close()


def node(nid: str, ntype: str, x: int, **config: Any) -> dict[str, Any]:
    """A diagram node ``nid`` of type ``ntype`` at ``(x, 0)`` with ``config``."""
    return {
        "id": nid,
        "type": ntype,
        "label": nid,
        "position": {"x": x, "y": 0},
        "config": config,
    }


def edge(s: str, t: str, port: str = "out") -> dict[str, Any]:
    """A diagram edge from ``s``'s ``port`` to ``t``'s input."""
    return {
        "id": f"{s}-{t}",
        "source": s,
        "source_port": port,
        "target": t,
        "target_port": "in",
    }


def pipeline() -> dict[str, Any]:
    return {
        "nodes": [
            node("hook", "trigger.webhook", 0),
            node("set_1", "control.set", 200, mapping={"id": "=body.id", "total": "=body.qty * 2"}),
            node("if_1", "control.if", 400, condition="=total > 100"),
        ],
        "edges": [edge("hook", "set_1"), edge("set_1", "if_1")],
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


def schedule_diagram() -> dict[str, Any]:
    d = pipeline()
    d["nodes"][0] = {
        "id": "tick",
        "type": "trigger.schedule",
        "label": "tick",
        "position": {"x": 0, "y": 0},
        "config": {"cron": "* * * * * *", "timezone": "UTC"},
    }
    d["edges"][0]["source"] = "tick"
    # A scheduled run's input is the fire record (no request body): map its real fields.
    d["nodes"][1]["config"]["mapping"] = {
        "id": "=schedule_id",
        "total": "=$length(local_time) * 10",
    }
    return d


class Tally:
    """Shared state of one load phase: request bodies, answers, errors, the deadline.

    ``limit``: at most this many requests in all (None: until the deadline only); ``ok``:
    the statuses that count as a success (their latencies are recorded)."""

    def __init__(
        self, seconds: float, limit: int | None = None, ok: frozenset[int] = frozenset({202})
    ) -> None:
        self.latencies: list[float] = []
        self.codes: dict[int, int] = {}
        self.errors = 0
        self.counter = 0
        self.deadline = time.perf_counter() + seconds
        self.limit = limit
        self.ok = ok

    def running(self) -> bool:
        """True until the deadline passes or ``limit`` requests were sent."""
        if self.limit is not None and self.counter >= self.limit:
            return False
        return time.perf_counter() < self.deadline

    def next_body(self) -> bytes:
        """A distinct JSON body for the next request."""
        self.counter += 1
        return b'{"id": %d, "qty": %d}' % (self.counter, self.counter % 100)

    def answer(self, status: int, t0: float) -> None:
        """Count an answer; a status in ``ok`` records its latency, anything else is an error."""
        self.codes[status] = self.codes.get(status, 0) + 1
        if status in self.ok:
            self.latencies.append(time.perf_counter() - t0)
        else:
            self.errors += 1

    async def drive(self, connections: int, one: Any) -> dict[str, Any]:
        """Run ``one(i)`` for each connection until the deadline; the phase's figures."""
        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(connections)))
        elapsed = time.perf_counter() - start
        return {
            "latencies": self.latencies,
            "codes": self.codes,
            "errors": self.errors,
            "elapsed": elapsed,
        }


async def load(urls: list[str], connections: int, seconds: float) -> dict[str, Any]:
    """httpx load: one ``AsyncClient`` with one keep-alive connection per worker task."""
    tally = Tally(seconds)

    async def one(i: int) -> None:
        url = urls[i % len(urls)]
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(limits=limits, timeout=10) as client:
            while tally.running():
                body = tally.next_body()
                t0 = time.perf_counter()
                try:
                    r = await client.post(
                        url, content=body, headers={"content-type": "application/json"}
                    )
                except httpx.HTTPError:
                    tally.errors += 1
                    continue
                tally.answer(r.status_code, t0)

    return await tally.drive(connections, one)


async def load_raw(
    urls: list[str],
    connections: int,
    seconds: float,
    *,
    limit: int | None = None,
    ok: frozenset[int] = frozenset({202}),
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Lean load (like wrk): raw HTTP/1.1 POSTs on ``connections`` keep-alive sockets.

    Each request is a distinct JSON body; the full response is read (Content-Length or
    chunked) and its status counted (``ok``: the success statuses). A failed or timed-out
    request (``timeout`` seconds) is an error and the connection is reopened. Stops at the
    deadline or after ``limit`` requests. Uses far less CPU per request than httpx, which
    matters when the generator shares the 2 cores with the server.
    """
    tally = Tally(seconds, limit, ok)

    async def one(i: int) -> None:
        url = httpx.URL(urls[i % len(urls)])
        host, port = url.host, url.port or 80
        head = (
            f"POST {url.raw_path.decode()} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\nContent-Length: "
        ).encode()
        writer: asyncio.StreamWriter | None = None
        reader: asyncio.StreamReader | None = None
        while tally.running():
            body = tally.next_body()
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(timeout):
                    if writer is None:
                        reader, writer = await asyncio.open_connection(host, port)
                    assert reader is not None
                    writer.write(b"%s%d\r\n\r\n%s" % (head, len(body), body))
                    status, keep = await read_response(reader)
            except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
                tally.errors += 1
                if writer is not None:
                    writer.close()
                writer = None
                continue
            tally.answer(status, t0)
            if not keep:
                writer.close()
                writer = None
        if writer is not None:
            writer.close()

    return await tally.drive(connections, one)


async def count_runs(env: dict[str, str]) -> tuple[int, int]:
    from sqlalchemy import text

    from backend.db.engine import make_engine

    engine = make_engine(env["DATABASE_URL"], pool_size=1)
    try:
        async with engine.connect() as conn:
            total = (
                await conn.execute(text("select count(*) from runs where trigger = 'webhook'"))
            ).scalar_one()
            done = (
                await conn.execute(
                    text(
                        "select count(*) from runs"
                        " where trigger = 'webhook' and status = 'succeeded'"
                    )
                )
            ).scalar_one()
            return int(total), int(done)
    finally:
        await engine.dispose()


async def fire_lags(env: dict[str, str]) -> list[float]:
    from sqlalchemy import text

    from backend.db.engine import make_engine

    engine = make_engine(env["DATABASE_URL"], pool_size=1)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("select lag_ms from schedule_fires where lag_ms is not null")
            )
            return [float(r[0]) for r in rows]
    finally:
        await engine.dispose()


def drive(client: str, urls: list[str], connections: int, seconds: float) -> dict[str, Any]:
    """Run the load generator ``client`` (``raw`` or ``httpx``) and print its figures."""
    generator = load_raw if client == "raw" else load
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        result: dict[str, Any] = runner.run(generator(urls, connections, seconds))
    lat = result["latencies"]
    figure("webhook_accepted_rps", len(lat) / result["elapsed"], "req/s")
    figure("webhook_errors", result["errors"], "requests")
    figure("webhook_latency_p50", percentile(lat, 0.50) * 1000, "ms")
    figure("webhook_latency_p99", percentile(lat, 0.99) * 1000, "ms")
    figure("webhook_accepted_total", len(lat), "requests")
    figure("load_average_1m", load_average(), "")
    if result["codes"].keys() - {202}:
        print(f"# non-202 answers: {result['codes']}", flush=True)
    return result


async def server_counters(env: dict[str, str]) -> tuple[int, int, int]:
    """``(PostgreSQL commits, transaction ids, Redis commands)`` so far."""
    commits, xid = await pg_counters(env["DATABASE_URL"])
    return commits, xid, await redis_commands(env["REDIS_URL"])


def paired(
    stack: Stack, token: str, base: str, bursts: int, requests: int, connections: int
) -> None:
    """The ``--pair`` comparison (module doc): figures ``webhook_pair_*``, ``_base`` for
    the other checkout's API."""
    stack.env["PYTHONPATH"] = base
    try:
        p_base, u_base = stack.api("api-base")
    finally:
        del stack.env["PYTHONPATH"]
    p_new, u_new = stack.api("api")
    sides = {"base": (p_base, f"{u_base}/hooks/{token}"), "new": (p_new, f"{u_new}/hooks/{token}")}
    cpu: dict[str, list[float]] = {"base": [], "new": []}
    lat: dict[str, list[float]] = {"base": [], "new": []}
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        for _, url in sides.values():  # warm-up: caches, pools, first compilations
            runner.run(load_raw([url], connections, 60, limit=200))
        for burst in range(bursts):
            for name in ("base", "new") if burst % 2 == 0 else ("new", "base"):
                proc, url = sides[name]
                before = cpu_seconds(proc.pid)
                result = runner.run(load_raw([url], connections, 120, limit=requests))
                done = max(1, len(result["latencies"]))
                cpu[name].append((cpu_seconds(proc.pid) - before) / done * 1000)
                lat[name].extend(result["latencies"])
                if result["errors"]:
                    print(f"# {name}: non-202 answers {result['codes']}", flush=True)
    for name, suffix in (("base", "_base"), ("new", "")):
        figure(f"webhook_pair_cpu_per_request{suffix}", statistics.median(cpu[name]), "ms")
        figure(f"webhook_pair_latency_p50{suffix}", percentile(lat[name], 0.50) * 1000, "ms")
        figure(f"webhook_pair_latency_p99{suffix}", percentile(lat[name], 0.99) * 1000, "ms")
    ratios = [new / old for old, new in zip(cpu["base"], cpu["new"], strict=True)]
    figure("webhook_pair_cpu_ratio", statistics.median(ratios), "")
    figure("load_average_1m", load_average(), "")


def profile_apis(
    apis: list[Any], where: Path, client: str, urls: list[str], connections: int
) -> None:
    """10 s more load (not in the figures above: the sampler takes CPU too) with py-spy on
    the API processes (bench/peers/profile.py); prints the ``# profile`` table of each."""
    from bench.peers.profile import Sampler, report

    sampler = Sampler(where)
    for i, proc in enumerate(apis):
        sampler.attach(f"api{i}", proc.pid)
    time.sleep(1.0)  # py-spy attached
    drive(client, urls, connections, 10.0)
    for name, summary in sampler.detach().items():
        for line in report(name, summary):
            print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--lag-seconds", type=float, default=600.0)
    parser.add_argument("--api-procs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="10 s load, 20 s of schedule ticks")
    parser.add_argument("--skip-lag", action="store_true")
    parser.add_argument(
        "--client",
        choices=["raw", "httpx"],
        default="raw",
        help="load generator: lean raw HTTP/1.1 sockets (default, like wrk) or httpx",
    )
    parser.add_argument(
        "--url", help="drive this URL instead of starting Railyard (a peer, for comparison)"
    )
    parser.add_argument("--pair", metavar="DIR", help="compare with the checkout in DIR")
    parser.add_argument("--pair-bursts", type=int, default=8)
    parser.add_argument("--pair-requests", type=int, default=400)
    parser.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        help="after the measured load, 10 s more with py-spy on the API processes (stacks in DIR)",
    )
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.lag_seconds = 10.0, 20.0
    if args.url:
        drive(args.client, [args.url], args.connections, args.seconds)
        return 0

    with Stack() as stack:
        env = stack.env
        token = asyncio.run(setup(env, pipeline()))
        if args.pair:
            stack.spawn("worker", "worker")
            paired(
                stack,
                token,
                str(Path(args.pair).resolve()),
                args.pair_bursts,
                args.pair_requests,
                args.connections,
            )
            return 0
        urls = []
        apis = []
        for i in range(args.api_procs):
            p, base = stack.api(f"api{i}")
            apis.append(p)
            urls.append(f"{base}/hooks/{token}")
        stack.spawn("worker", "worker")

        time.sleep(1.0)  # the statistics collector flushes at most once a second
        before = asyncio.run(server_counters(env))
        pg0 = asyncio.run(pg_share.snapshot(stack))
        cpu_before = sum(cpu_seconds(p.pid) for p in apis)
        result = drive(args.client, urls, args.connections, args.seconds)
        cpu = sum(cpu_seconds(p.pid) for p in apis) - cpu_before
        accepted = max(1, len(result["latencies"]))
        figure("webhook_api_cpu_per_request", cpu / accepted * 1000, "ms")
        deadline = time.monotonic() + 120
        total, done = asyncio.run(count_runs(env))
        while done < total and time.monotonic() < deadline:
            time.sleep(1)
            total, done = asyncio.run(count_runs(env))
        figure("webhook_runs_stored", total, "runs")
        figure("webhook_runs_completed", done, "runs")
        time.sleep(1.0)
        after = asyncio.run(server_counters(env))
        pg1 = asyncio.run(pg_share.snapshot(stack))
        runs = max(1, total)
        figure("webhook_pg_commits_per_run", (after[0] - before[0]) / runs, "xact")
        figure("webhook_pg_writes_per_run", (after[1] - before[1]) / runs, "xact")
        figure("webhook_redis_commands_per_run", (after[2] - before[2]) / runs, "commands")
        records = asyncio.run(pg_share.wal_records(stack, pg0, pg1))
        pg_share.report(pg0, pg1, records, runs, prefix="webhook")
        if args.profile:
            profile_apis(apis, args.profile, args.client, urls, args.connections)

        if not args.skip_lag:
            asyncio.run(setup(env, schedule_diagram()))
            stack.spawn("scheduler", "scheduler")
            time.sleep(args.lag_seconds)
            lags = asyncio.run(fire_lags(env))
            figure("schedule_fires", len(lags), "fires")
            figure("schedule_fire_lag_p50", percentile(lags, 0.50), "ms")
            figure("schedule_fire_lag_p99", percentile(lags, 0.99), "ms")
            if lags:
                figure("schedule_fire_lag_mean", statistics.fmean(lags), "ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
