"""One driver per broker for the shared broker trigger scenarios (test_broker_cases.py).

A :class:`BrokerCase` knows its trigger, the server under it (``stop``/``start``: a
broker restart with the data kept), the trigger config for a fresh subject name, how to
make the broker keep messages for that name before any subscription ran (``prepare``:
a durable queue, a stream, an MQTT persistent session) and how to publish a body there.

:func:`start_listen` runs a trigger's ``listen`` with an ``emit`` of the test's own, as
the product would; :class:`GatedEmit` holds its first event's ``emit`` open until the
test releases it (the run being stored while the broker goes away).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aio_pika
import aiomqtt
import nats
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from redis.asyncio import Redis

from connectors import sdk
from connectors.builtin.brokers import amqp_queue, mqtt_topic, nats_jetstream, redis_streams
from connectors.testing import DeadLetter, ListenDone, TriggerTestEnvironment

LISTEN_TIMEOUT = 15.0
"""Seconds any one subscription in these tests may take."""


def fresh_name(prefix: str) -> str:
    """A queue / stream / topic name no other test uses."""
    return f"{prefix}{uuid.uuid4().hex[:10]}"


class GatedEmit:
    """Records events; the first ``emit`` returns only once :attr:`release` is set."""

    def __init__(self) -> None:
        self.events: list[sdk.TriggerEvent] = []
        self.dead_letters: list[DeadLetter] = []
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, event: sdk.TriggerEvent) -> None:
        self.events.append(event)
        self.arrived.set()
        await self.release.wait()

    async def dead_letter(self, reason: str, raw: bytes | str, meta: dict[str, str]) -> None:
        self.dead_letters.append(DeadLetter(reason, raw, dict(meta)))


class SlowEmit:
    """Records events; each ``emit`` takes ``delay`` seconds (a run being stored) and the
    ``count``-th raises :class:`ListenDone` (it is not acked). :attr:`most_at_once` is
    the largest number of ``emit`` calls that were running together."""

    def __init__(self, count: int, delay: float) -> None:
        self.count = count
        self.delay = delay
        self.events: list[sdk.TriggerEvent] = []
        self.running = 0
        self.most_at_once = 0
        self.stored = asyncio.Event()

    async def __call__(self, event: sdk.TriggerEvent) -> None:
        self.events.append(event)
        if len(self.events) >= self.count:
            raise ListenDone
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.running -= 1
        if len(self.events) == self.count - 1 and self.running == 0:
            self.stored.set()

    async def dead_letter(self, reason: str, raw: bytes | str, meta: dict[str, str]) -> None:
        raise AssertionError(f"unexpected dead letter: {reason}")


def start_listen(
    env: TriggerTestEnvironment, trig: sdk.TriggerDefinition, config: dict[str, Any], emit: Any
) -> asyncio.Task[Any]:
    """``listen`` as a task, in the context ``env`` builds (its SSRF policy, credentials)."""
    info = sdk.ActionInfo(
        run_id="",
        workflow_id=env.workflow_id,
        step_id=env.step_id,
        attempt=1,
        idempotency_key=f"{env.workflow_id}:{env.step_id}",
        node_type=trig.type,
    )
    return asyncio.create_task(trig.call("listen", config, env.context_for(info, {}), emit))


class BrokerCase:
    """What the shared scenarios need of one broker (see the module doc)."""

    label = ""
    trigger: sdk.TriggerDefinition

    def __init__(self, server: Any) -> None:
        self.server = server

    def config(self, name: str) -> dict[str, Any]:
        raise NotImplementedError

    async def prepare(self, name: str) -> None:
        """Make the broker keep what is published to ``name`` from now on."""

    async def publish(self, name: str, body: bytes) -> None:
        raise NotImplementedError


class RedisCase(BrokerCase):
    label = "redis_streams"
    trigger = redis_streams.message_received

    def config(self, name: str) -> dict[str, Any]:
        return {"url": self.server.url, "stream": name, "start": "all", "payload": "json"}

    async def publish(self, name: str, body: bytes) -> None:
        client = Redis.from_url(self.server.url)
        try:
            await client.xadd(name, {"payload": body, "source": "test"})
        finally:
            await client.aclose()


class AmqpCase(BrokerCase):
    label = "amqp"
    trigger = amqp_queue.message_received

    def config(self, name: str) -> dict[str, Any]:
        return {"url": self.server.url.replace("guest:guest@", ""), "queue": name}

    async def prepare(self, name: str) -> None:
        connection = await aio_pika.connect(self.server.url)
        async with connection:
            channel = await connection.channel()
            await channel.declare_queue(name, durable=True)

    async def publish(self, name: str, body: bytes, **properties: Any) -> None:
        connection = await aio_pika.connect(self.server.url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            message = aio_pika.Message(
                body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT, **properties
            )
            await channel.default_exchange.publish(message, routing_key=name)


def mqtt_port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


class MqttCase(BrokerCase):
    label = "mqtt"
    trigger = mqtt_topic.message_received

    def config(self, name: str) -> dict[str, Any]:
        return {"url": self.server.url, "topic": f"{name}/#", "client_id": name}

    async def prepare(self, name: str) -> None:
        # the first subscription creates the persistent session that queues messages
        with pytest.raises(TimeoutError):
            await TriggerTestEnvironment().listen(self.trigger, self.config(name), timeout=2)

    async def publish(
        self,
        name: str,
        body: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        user: dict[str, str] | None = None,
    ) -> None:
        properties = None
        if user:
            properties = Properties(PacketTypes.PUBLISH)
            properties.UserProperty = list(user.items())
        async with aiomqtt.Client(
            "127.0.0.1",
            mqtt_port(self.server.url),
            protocol=aiomqtt.ProtocolVersion.V5,
        ) as client:
            await client.publish(
                f"{name}/events", body, qos=qos, retain=retain, properties=properties
            )


class NatsCase(BrokerCase):
    label = "nats"
    trigger = nats_jetstream.message_received

    def config(self, name: str) -> dict[str, Any]:
        return {
            "url": self.server.url,
            "stream": name,
            "subject": f"{name}.>",
            "deliver": "all",
            "ack_wait": 1,
        }

    async def prepare(self, name: str) -> None:
        nc = await nats.connect(self.server.url)
        try:
            await nc.jetstream().add_stream(name=name, subjects=[f"{name}.>"])
        finally:
            await nc.close()

    async def publish(self, name: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        nc = await nats.connect(self.server.url)
        try:
            await nc.jetstream().publish(f"{name}.events", body, headers=headers)
        finally:
            await nc.close()
