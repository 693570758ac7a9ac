"""Connector triggers, measured the production way: broker events to stored runs, and the
lag of polling triggers.

Starts the bench stack (bench/cluster.py: embedded PostgreSQL with durable settings, Redis,
migrated) and the brokers from their Debian packages on 127.0.0.1 (a second Redis with its
append-only file for Redis Streams, RabbitMQ, Mosquitto without its limit of 1,000
messages queued per client (which would drop most of a burst), nats-server with
JetStream; the same server classes the broker tests start), publishes one workflow per
broker (``<broker> message received -> Set``), then runs one ``railyard events`` process
(no API) and ``--workers`` (2) ``railyard worker`` processes.

Throughput, one broker after the other: one warm-up message (its run waited for), then
``--events`` (5,000) messages published as fast as the broker takes them, each with its
own id; the figure is messages per second from the first publish to the last run stored
(``runs`` rows of the workflow, counted every 50 ms). The publisher is faster than the
subscription, so the figure is the subscription's: read, store the event, start its run,
ack.

Poll lag: ``--polls`` (300) workflows with ``http.new_items`` polling a local vendor (a new
item every 10 s per feed) at the trigger's floor interval (30 s), run by one ``railyard
scheduler``; after the first poll of each (the baseline), ``--poll-seconds`` (65) of
polling, and the p50/p95/p99 of ``railyard_trigger_poll_lag_seconds`` over that window
(the scheduler's /metrics, quantiles interpolated within the histogram's buckets as
PromQL's ``histogram_quantile`` does), and the polls and runs it made.

Figures: ``trigger_<broker>_events_per_second``, ``trigger_<broker>_events``,
``trigger_<broker>_pg_commits_per_event``, ``trigger_<broker>_events_cpu_per_event``
(ms), ``trigger_poll_lag_p50/p95/p99`` (s), ``trigger_polls``, ``trigger_poll_runs``,
``trigger_poll_interval`` (s) and the 1-minute load average after each phase
(``trigger_<broker>_load_average``, ``trigger_poll_load_average``) and at the end.
``--quick``: 1,000 events per broker and 40 polling subscriptions. Bounded: every phase
stops after its own time limit.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.cluster import Stack  # noqa: E402
from bench.common import (  # noqa: E402
    cpu_seconds,
    figure,
    load_average,
    percentile,
    pg_counters,
)

BROKERS = ("redis", "amqp", "mqtt", "nats")
POLL_INTERVAL = 30.0
"""Seconds between two polls of a subscription (``http.new_items``' floor)."""
PHASE_LIMIT = 300.0
"""Seconds one broker's burst may take before the bench gives up on it."""


def diagram(trigger: str, config: dict[str, Any]) -> dict[str, Any]:
    """``trigger`` (with ``config``) -> Set."""

    def node(nid: str, ntype: str, x: int, **cfg: Any) -> dict[str, Any]:
        return {"id": nid, "type": ntype, "label": nid, "position": {"x": x, "y": 0}, "config": cfg}

    return {
        "nodes": [
            node("event", trigger, 0, **config),
            node("note", "control.set", 200, mapping={"seen": "=message_id"}),
        ],
        "edges": [
            {
                "id": "event-note",
                "source": "event",
                "source_port": "out",
                "target": "note",
                "target_port": "in",
            }
        ],
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


async def publish_workflows(env: dict[str, str], diagrams: list[dict[str, Any]]) -> list[str]:
    """Create an admin and publish each diagram as a workflow; their ids, in order."""
    import msgspec

    from backend.runtime import build_runtime
    from backend.services.identity import accounts
    from backend.services.workflows import workflows
    from backend.settings import load_settings
    from designer_schema.diagram import Diagram

    settings = load_settings(environ=env)
    rt = await build_runtime(settings, pool_size=2)
    ids = []
    try:
        async with rt.sessionmaker() as session, session.begin():
            user = await accounts.create_user(
                session, f"bench{time.time_ns()}@example.com", "bench-password-123", role="admin"
            )
        for i, d in enumerate(diagrams):
            async with rt.sessionmaker() as session, session.begin():
                wf = await workflows.create_workflow(session, f"trigger bench {i}", user.id)
                await workflows.save_draft(session, wf.id, msgspec.convert(d, Diagram), rt.catalog)
                await workflows.publish(session, wf.id, rt.catalog, user.id)
                ids.append(str(wf.id))
        return ids
    finally:
        await rt.close()


class RunCounter:
    """Counts a workflow's stored runs on a connection of its own."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: Any = None

    async def __aenter__(self) -> RunCounter:
        import asyncpg

        self.conn = await asyncpg.connect(self.dsn)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.conn.close()

    async def count(self, workflow_id: str) -> int:
        return int(
            await self.conn.fetchval(
                "select count(*) from runs where workflow_id = $1::uuid", workflow_id
            )
        )

    async def wait(self, workflow_id: str, n: int, limit: float) -> float | None:
        """Seconds until the workflow has ``n`` runs (None: not within ``limit``)."""
        start = time.monotonic()
        while time.monotonic() - start < limit:
            if await self.count(workflow_id) >= n:
                return time.monotonic()
            await asyncio.sleep(0.05)
        return None


# -- brokers ------------------------------------------------------------------------------


class Broker:
    """One broker: its server, the trigger's config and a fast publisher.
    ``concurrency`` is the trigger's "Messages stored at once" (1: one after the other)."""

    name = ""
    trigger = ""

    def __init__(self, server: Any, concurrency: int = 1) -> None:
        self.server = server
        self.concurrency = concurrency

    def config(self) -> dict[str, Any]:
        raise NotImplementedError

    async def prepare(self) -> None:
        """Make the broker keep messages for the subscription before it connects."""

    async def publish(self, bodies: list[bytes], ids: list[str]) -> None:
        raise NotImplementedError


class RedisBroker(Broker):
    name, trigger = "redis", "redis_streams.message_received"

    def config(self) -> dict[str, Any]:
        return {
            "url": self.server.url,
            "stream": "bench",
            "start": "all",
            "payload": "json",
            "concurrency": self.concurrency,
        }

    async def publish(self, bodies: list[bytes], ids: list[str]) -> None:
        from redis.asyncio import Redis

        client = Redis.from_url(self.server.url)
        try:
            for chunk in range(0, len(bodies), 500):
                pipe = client.pipeline(transaction=False)
                for body in bodies[chunk : chunk + 500]:
                    pipe.xadd("bench", {"payload": body})
                await pipe.execute()
        finally:
            await client.aclose()


class AmqpBroker(Broker):
    name, trigger = "amqp", "amqp.message_received"

    def config(self) -> dict[str, Any]:
        return {
            "url": self.server.url.replace("guest:guest@", ""),
            "queue": "bench",
            "prefetch": max(20, 2 * self.concurrency),
            "concurrency": self.concurrency,
        }

    async def prepare(self) -> None:
        import aio_pika

        connection = await aio_pika.connect(self.server.url)
        async with connection:
            channel = await connection.channel()
            await channel.declare_queue("bench", durable=True)

    async def publish(self, bodies: list[bytes], ids: list[str]) -> None:
        import aio_pika

        connection = await aio_pika.connect(self.server.url)
        async with connection:
            # no publisher confirms: the runs stored say what arrived, and a confirm per
            # message would make the publisher, not the subscription, the bottleneck
            channel = await connection.channel(publisher_confirms=False)
            persistent = aio_pika.DeliveryMode.PERSISTENT

            async def one(body: bytes, mid: str) -> None:
                message = aio_pika.Message(body, delivery_mode=persistent, message_id=mid)
                await channel.default_exchange.publish(message, routing_key="bench")

            for chunk in range(0, len(bodies), 200):
                await asyncio.gather(
                    *(
                        one(b, m)
                        for b, m in zip(
                            bodies[chunk : chunk + 200], ids[chunk : chunk + 200], strict=True
                        )
                    )
                )


class MqttBroker(Broker):
    name, trigger = "mqtt", "mqtt.message_received"

    def config(self) -> dict[str, Any]:
        return {"url": self.server.url, "topic": "bench/#", "client_id": "railyard-bench"}

    async def prepare(self) -> None:
        """The persistent session the trigger resumes, created by subscribing once."""
        import aiomqtt

        async with aiomqtt.Client(
            "127.0.0.1",
            int(self.server.url.rsplit(":", 1)[1]),
            identifier="railyard-bench",
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=False,
            properties=_session_expiry(3600),
        ) as client:
            await client.subscribe("bench/#", qos=1)

    async def publish(self, bodies: list[bytes], ids: list[str]) -> None:
        import aiomqtt

        port = int(self.server.url.rsplit(":", 1)[1])
        async with aiomqtt.Client(
            "127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V5, max_inflight_messages=200
        ) as client:
            for body in bodies:
                await client.publish("bench/events", body, qos=1)


class NatsBroker(Broker):
    name, trigger = "nats", "nats.message_received"

    def config(self) -> dict[str, Any]:
        return {
            "url": self.server.url,
            "stream": "bench",
            "subject": "bench.>",
            "deliver": "all",
            "batch": max(20, self.concurrency),
            "concurrency": self.concurrency,
        }

    async def prepare(self) -> None:
        import nats

        nc = await nats.connect(self.server.url)
        try:
            await nc.jetstream().add_stream(name="bench", subjects=["bench.>"])
        finally:
            await nc.close()

    async def publish(self, bodies: list[bytes], ids: list[str]) -> None:
        import nats

        nc = await nats.connect(self.server.url)
        try:
            js = nc.jetstream()
            for chunk in range(0, len(bodies), 200):
                await asyncio.gather(
                    *(
                        js.publish("bench.events", b, headers={"Nats-Msg-Id": m})
                        for b, m in zip(
                            bodies[chunk : chunk + 200], ids[chunk : chunk + 200], strict=True
                        )
                    )
                )
        finally:
            await nc.close()


def _session_expiry(seconds: int) -> Any:
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    properties = Properties(PacketTypes.CONNECT)
    properties.SessionExpiryInterval = seconds
    return properties


def start_brokers(
    directory: Path, names: list[str], concurrency: int
) -> tuple[list[Broker], list[Any]]:
    """Start the servers of ``names`` under ``directory``: the brokers (their triggers
    storing ``concurrency`` messages at once, but MQTT's: in order) and every server to
    stop at the end."""
    from backend.embedded import EmbeddedRedis
    from tests.broker_servers import MosquittoServer, NatsServer, RabbitMQServer

    brokers: list[Broker] = []
    servers: list[Any] = []
    for name in names:
        if name == "redis":
            redis = EmbeddedRedis(directory / "streams-redis")
            redis.start()
            servers.append(redis)
            brokers.append(RedisBroker(redis, concurrency))
        elif name == "amqp":
            rabbit = RabbitMQServer(directory / "rabbitmq")
            servers.append(rabbit)
            rabbit.start()
            brokers.append(AmqpBroker(rabbit, concurrency))
        elif name == "mqtt":
            # a burst of --events QoS 1 messages waits in the session's queue: Mosquitto's
            # default of 1,000 queued messages per client would drop the rest
            mosquitto = MosquittoServer(directory / "mosquitto", max_queued=0)
            servers.append(mosquitto)
            mosquitto.start()
            brokers.append(MqttBroker(mosquitto))
        elif name == "nats":
            nats_server = NatsServer(directory / "nats")
            servers.append(nats_server)
            nats_server.start()
            brokers.append(NatsBroker(nats_server, concurrency))
    return brokers, servers


def stop_servers(servers: list[Any]) -> None:
    for server in reversed(servers):
        try:
            server.stop()
        finally:
            if hasattr(server, "stop_epmd"):
                server.stop_epmd()


async def burst(
    broker: Broker, workflow_id: str, dsn: str, events: int, label: str, pid: int
) -> tuple[float, int, float]:
    """One warm-up message, then ``events`` messages: ``(events per second, runs, CPU
    seconds of process ``pid`` (the events process) from the first to the last run)``."""
    async with RunCounter(dsn) as counter:
        base = await counter.count(workflow_id)
        await broker.publish([b'{"warm": true}'], [f"{label}-warm"])
        if await counter.wait(workflow_id, base + 1, 120) is None:
            raise RuntimeError(f"{broker.name}: the warm-up message started no run in 120 s")
        cpu = cpu_seconds(pid)
        bodies = [json.dumps({"n": i, "label": label}).encode() for i in range(events)]
        ids = [f"{label}-{i}" for i in range(events)]
        start = time.monotonic()
        await broker.publish(bodies, ids)
        published = time.monotonic() - start
        done = await counter.wait(workflow_id, base + 1 + events, PHASE_LIMIT)
        cpu = cpu_seconds(pid) - cpu
        runs = await counter.count(workflow_id) - base - 1
        print(f"{broker.name}: published {events} in {published:.2f} s", flush=True)
        if done is None:
            return math.nan, runs, cpu
        return events / (done - start), runs, cpu


# -- polling ------------------------------------------------------------------------------


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


# -- main ---------------------------------------------------------------------------------


def throughput(
    stack: Stack,
    names: list[str],
    events: int,
    workers: int,
    concurrency: int,
    profile: Path | None = None,
) -> None:
    """The broker phase (see the module doc)."""
    brokers, servers = start_brokers(stack.data / "brokers", names, concurrency)
    try:
        for broker in brokers:
            asyncio.run(broker.prepare())
        ids = asyncio.run(
            publish_workflows(stack.env, [diagram(b.trigger, b.config()) for b in brokers])
        )
        for _ in range(workers):
            stack.worker()
        events_proc = stack.spawn("events", "events")
        for broker, workflow_id in zip(brokers, ids, strict=True):
            label = f"{broker.name}{time.time_ns()}"
            commits0 = asyncio.run(pg_counters(stack.pg.url))[0]
            rate, runs, cpu = asyncio.run(
                burst(broker, workflow_id, stack.pg.dsn, events, label, events_proc.pid)
            )
            time.sleep(1.0)  # the statistics collector flushes at most once a second
            commits = asyncio.run(pg_counters(stack.pg.url))[0] - commits0
            figure(f"trigger_{broker.name}_events_per_second", rate, "events/s")
            figure(f"trigger_{broker.name}_events", runs, "runs")
            figure(f"trigger_{broker.name}_pg_commits_per_event", commits / max(1, runs), "xact")
            figure(f"trigger_{broker.name}_events_cpu_per_event", cpu / max(1, runs) * 1000, "ms")
            figure(f"trigger_{broker.name}_load_average", load_average(), "")
            if profile is not None:
                profiled(broker, workflow_id, stack, events_proc.pid, events, profile)
    finally:
        stop_servers(servers)


def profiled(
    broker: Broker, workflow_id: str, stack: Stack, pid: int, events: int, where: Path
) -> None:
    """One more burst (not in the figures: the sampler takes CPU too) with py-spy on the
    events process (bench/peers/profile.py); prints its ``# profile`` table."""
    from bench.peers.profile import Sampler, report

    sampler = Sampler(where)
    sampler.attach(f"events-{broker.name}", pid)
    time.sleep(1.0)  # py-spy attached
    label = f"{broker.name}-profiled{time.time_ns()}"
    asyncio.run(burst(broker, workflow_id, stack.pg.dsn, events, label, pid))
    for name, summary in sampler.detach().items():
        for line in report(name, summary):
            print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5000, help="messages per broker")
    parser.add_argument("--brokers", default=",".join(BROKERS), help="comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=100,
        help="the triggers' 'Messages stored at once' (1 to 100; MQTT is always 1)",
    )
    parser.add_argument("--polls", type=int, default=300, help="polling subscriptions")
    parser.add_argument("--poll-seconds", type=float, default=65.0)
    parser.add_argument("--skip-polls", action="store_true")
    parser.add_argument("--skip-brokers", action="store_true")
    parser.add_argument("--quick", action="store_true", help="1,000 events, 40 subscriptions")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs directory")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        help="after each broker's burst, one more with py-spy on the events process",
    )
    args = parser.parse_args()
    if args.quick:
        args.events, args.polls, args.poll_seconds = 1000, 40, 35.0
    names = [n for n in args.brokers.split(",") if n]
    unknown = set(names) - set(BROKERS)
    if unknown:
        parser.error(f"unknown brokers: {', '.join(sorted(unknown))}")
    env = {"RAILYARD_HTTP_ALLOW_PRIVATE": "1"}
    with Stack("railyard-bench-triggers-", env=env, keep=args.keep) as stack:
        print(f"data and logs: {stack.data}", flush=True)
        if not args.skip_brokers:
            throughput(stack, names, args.events, args.workers, args.concurrency, args.profile)
        if not args.skip_polls:
            poll_lag(stack, args.polls, args.poll_seconds, args.profile)
        figure("trigger_load_average", load_average(), "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
