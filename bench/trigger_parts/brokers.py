"""bench/triggers.py's broker phase: the brokers from their Debian packages on 127.0.0.1,
a publisher for each, and one burst of messages counted to their stored runs."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds

BROKERS = ("redis", "amqp", "mqtt", "nats")
PHASE_LIMIT = 300.0
"""Seconds one broker's burst may take before the bench gives up on it."""


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
