"""bench/triggers.py's poll lag phase: local feeds (a new item every 10 s each), polling
subscriptions on them, and the lag read from the scheduler's histogram."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from bench.cluster import Stack
from bench.common import cpu_seconds, figure, load_average, percentile
from bench.trigger_parts.workflows import diagram, publish_workflows

POLL_INTERVAL = 30.0
"""Seconds between two polls of a subscription (``http.new_items``' floor)."""


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A poller gone mid-answer (the scheduler stopped) is not an error here."""


class Feeds:
    """``GET /feed/<n>``: feed ``n``'s items, a new one every ``every`` seconds (the last
    three listed); counts requests."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self.requests = 0
        self.times: dict[str, list[float]] = {}
        self._server: ThreadingHTTPServer | None = None

    def periods(self, since: float) -> list[float]:
        """Seconds between two polls of one feed, for each poll after ``since`` (a
        monotonic time) that had one before it."""
        gaps = []
        for times in list(self.times.values()):
            gaps += [b - a for a, b in itertools.pairwise(times) if b > since]
        return gaps

    def url(self, n: int) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/feed/{n}"

    def start(self) -> Feeds:
        feeds = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                feeds.requests += 1
                n = self.path.rsplit("/", 1)[-1]
                feeds.times.setdefault(n, []).append(time.monotonic())
                now = int(time.time() / feeds.every)
                items = [{"id": f"{n}-{k}", "seq": k} for k in range(now - 2, now + 1)]
                body = json.dumps({"items": items}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


_SAMPLE = re.compile(r'^railyard_trigger_poll_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', re.M)


def lag_buckets(metrics_url: str) -> list[tuple[float, float]]:
    """``(upper bound, cumulative count)`` of the poll lag histogram at ``metrics_url``."""
    text = httpx.get(metrics_url, timeout=10).text
    return [(float(le), float(count)) for le, count in _SAMPLE.findall(text)]


def histogram_quantile(q: float, before: list[tuple[float, float]], after: list[Any]) -> float:
    """The ``q`` quantile of the observations between two readings of a histogram, linear
    within its bucket (PromQL's ``histogram_quantile``); NaN without observations."""
    counts = [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]
    total = counts[-1][1] if counts else 0
    if total <= 0:
        return math.nan
    rank = q * total
    lower, below = 0.0, 0.0
    for le, cumulative in counts:
        if cumulative >= rank:
            if math.isinf(le):
                return lower
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, cumulative
    return lower


async def polled_runs(dsn: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("select count(*) from runs where trigger = 'polling'"))
    finally:
        await conn.close()


async def baseline_taken(dsn: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval(
                "select count(*) from trigger_subscriptions"
                " where kind = 'polling' and baseline_taken"
            )
        )
    finally:
        await conn.close()


def poll_lag(stack: Stack, polls: int, seconds: float, profile: Path | None = None) -> None:
    """The poll lag phase (see the module doc)."""
    from backend.embedded import free_port

    feeds = Feeds().start()
    try:
        config: dict[str, Any] = {"items": "items", "id": "id", "mode": "newest", "order": "seq"}
        config["poll_interval"] = POLL_INTERVAL  # the trigger's floor
        diagrams = [
            diagram("http.new_items", {"url": feeds.url(n), **config}) for n in range(polls)
        ]
        asyncio.run(publish_workflows(stack.env, diagrams))
        port = free_port()
        metrics = f"http://127.0.0.1:{port}/metrics"
        scheduler = stack.spawn(
            "scheduler",
            "scheduler",
            "--health-port",
            str(port),
            ready=f"http://127.0.0.1:{port}/health/live",
        )
        deadline = time.monotonic() + 120
        while asyncio.run(baseline_taken(stack.pg.dsn)) < polls:
            if time.monotonic() > deadline:
                raise RuntimeError("the first polls did not end within 120 s")
            time.sleep(0.5)
        sampler = None
        if profile is not None:
            from bench.peers.profile import Sampler

            sampler = Sampler(profile)
            sampler.attach("scheduler", scheduler.pid)
        before = lag_buckets(metrics)
        requests, runs = feeds.requests, asyncio.run(polled_runs(stack.pg.dsn))
        cpu = cpu_seconds(scheduler.pid)
        since = time.monotonic()
        time.sleep(seconds)
        cpu = cpu_seconds(scheduler.pid) - cpu
        after = lag_buckets(metrics)
        if sampler is not None:
            from bench.peers.profile import report

            for name, summary in sampler.detach().items():
                for line in report(name, summary):
                    print(line, flush=True)
        figure("trigger_poll_interval", POLL_INTERVAL, "s")
        figure("trigger_poll_subscriptions", polls, "subscriptions")
        done = feeds.requests - requests
        figure("trigger_polls", done, "polls")
        figure("trigger_poll_cpu_per_poll", cpu / max(1, done) * 1000, "ms")
        figure("trigger_poll_runs", asyncio.run(polled_runs(stack.pg.dsn)) - runs, "runs")
        for q in (0.50, 0.95, 0.99):
            figure(f"trigger_poll_lag_p{round(q * 100)}", histogram_quantile(q, before, after), "s")
        periods = feeds.periods(since)
        for q in (0.50, 0.95, 0.99):
            figure(f"trigger_poll_period_p{round(q * 100)}", percentile(periods, q), "s")
        figure("trigger_poll_load_average", load_average(), "")
    finally:
        feeds.stop()
