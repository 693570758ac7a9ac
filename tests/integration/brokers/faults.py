"""What the broker fault tests (test_broker_faults.py) publish with and check.

A :class:`Publisher` keeps one connection to its broker and publishes a stream of
messages, each with an id of its own, one after the other at a steady pace. It makes
sure of every message as a producer that must not lose one would: it waits for the
broker's confirmation (RabbitMQ publisher confirms, MQTT ``PUBACK``, JetStream's publish
ack, Redis's ``XADD`` reply), and when the connection fails (the broker restarting) it
connects again and publishes the unconfirmed message again. A second copy is the
at-least-once delivery every broker documents; the broker or the trigger's message id
makes it one event:

- Redis Streams: the publisher names each entry's id (``<n>-0``); ``XADD`` refuses an id
  the stream already has, which says the first try got there;
- RabbitMQ: the ``message_id`` property; MQTT: the MQTT 5 user property ``message_id``;
  NATS: the ``Nats-Msg-Id`` header (JetStream drops the copy in its duplicate window).

:meth:`Publisher.event_id` is the event id the trigger gives message ``n``: what the
exactly-once check expects one run for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import aio_pika
import aiomqtt
import msgspec
import nats
import redis.exceptions
from nats.js import JetStreamContext
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from redis.asyncio import Redis

from tests.integration.brokers.cases import (
    AmqpCase,
    BrokerCase,
    MqttCase,
    NatsCase,
    RedisCase,
    mqtt_port,
)

log = logging.getLogger(__name__)

SEND_TIMEOUT = 10.0
"""Seconds one publish may wait for its confirmation before it counts as failed."""


class Publisher:
    """Publishes ``message-<n>`` (body ``{"n": n}``) to the subject ``name`` of ``case``'s
    broker; see the module doc. ``published`` counts the confirmed messages,
    ``failures`` the publishes that failed and were tried again."""

    def __init__(self, case: BrokerCase, name: str) -> None:
        self.case = case
        self.name = name
        self.published = 0
        self.failures = 0
        self._connected = False

    @staticmethod
    def message_id(n: int) -> str:
        return f"message-{n}"

    def event_id(self, n: int) -> str:
        """The trigger's event id of message ``n``."""
        return self.message_id(n)

    async def connect(self) -> None:
        raise NotImplementedError

    async def send(self, n: int, body: bytes) -> None:
        """Publish message ``n`` and wait for the broker's confirmation."""
        raise NotImplementedError

    async def close(self) -> None:
        """Drop the connection (errors of a broken one ignored)."""

    async def run(self, count: int, pace: float) -> None:
        """Publish messages 0 .. ``count - 1``, ``pace`` seconds apart, each until
        confirmed (reconnecting as needed)."""
        try:
            for n in range(count):
                body = msgspec.json.encode({"n": n})
                while True:
                    try:
                        if not self._connected:
                            await asyncio.wait_for(self.connect(), SEND_TIMEOUT)
                            self._connected = True
                        await asyncio.wait_for(self.send(n, body), SEND_TIMEOUT)
                        break
                    except Exception as exc:  # any failure of the connection: again
                        log.info("publishing %s failed (%r); again", n, exc)
                        self.failures += 1
                        self._connected = False
                        with contextlib.suppress(Exception):
                            await asyncio.wait_for(self.close(), SEND_TIMEOUT)
                        await asyncio.sleep(0.2)
                self.published += 1
                await asyncio.sleep(pace)
        finally:
            with contextlib.suppress(Exception):
                await self.close()


class RedisPublisher(Publisher):
    def __init__(self, case: BrokerCase, name: str) -> None:
        super().__init__(case, name)
        self.client: Redis | None = None

    @staticmethod
    def entry_id(n: int) -> str:
        return f"{n + 1}-0"

    def event_id(self, n: int) -> str:
        return f"{self.name}:{self.entry_id(n)}"

    async def connect(self) -> None:
        self.client = Redis.from_url(self.case.server.url, socket_timeout=SEND_TIMEOUT)
        await self.client.ping()

    async def send(self, n: int, body: bytes) -> None:
        assert self.client is not None
        try:
            await self.client.xadd(
                self.name, {"payload": body, "id": self.message_id(n)}, id=self.entry_id(n)
            )
        except redis.exceptions.ResponseError as err:
            if "equal or smaller" not in str(err):
                raise  # otherwise the entry is there: an earlier try got through

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.aclose()


class AmqpPublisher(Publisher):
    def __init__(self, case: BrokerCase, name: str) -> None:
        super().__init__(case, name)
        self.connection: Any = None
        self.channel: Any = None

    async def connect(self) -> None:
        self.connection = await aio_pika.connect(self.case.server.url)
        self.channel = await self.connection.channel(publisher_confirms=True)

    async def send(self, n: int, body: bytes) -> None:
        message = aio_pika.Message(
            body,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=self.message_id(n),
            content_type="application/json",
        )
        await self.channel.default_exchange.publish(message, routing_key=self.name)

    async def close(self) -> None:
        connection, self.connection, self.channel = self.connection, None, None
        if connection is not None:
            await connection.close()


class MqttPublisher(Publisher):
    def __init__(self, case: BrokerCase, name: str) -> None:
        super().__init__(case, name)
        self.client: aiomqtt.Client | None = None

    async def connect(self) -> None:
        self.client = aiomqtt.Client(
            "127.0.0.1",
            mqtt_port(self.case.server.url),
            protocol=aiomqtt.ProtocolVersion.V5,
            timeout=SEND_TIMEOUT,
        )
        await self.client.__aenter__()

    async def send(self, n: int, body: bytes) -> None:
        assert self.client is not None
        properties = Properties(PacketTypes.PUBLISH)
        properties.UserProperty = [("message_id", self.message_id(n))]
        # QoS 1: returns once the broker's PUBACK arrived
        await self.client.publish(f"{self.name}/events", body, qos=1, properties=properties)

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.__aexit__(None, None, None)


class NatsPublisher(Publisher):
    def __init__(self, case: BrokerCase, name: str) -> None:
        super().__init__(case, name)
        self.nc: Any = None
        self.js: JetStreamContext | None = None

    async def connect(self) -> None:
        # no reconnects of its own: a failure surfaces, and run() connects again
        self.nc = await nats.connect(self.case.server.url, allow_reconnect=False, connect_timeout=2)
        self.js = self.nc.jetstream()

    async def send(self, n: int, body: bytes) -> None:
        assert self.js is not None
        await self.js.publish(
            f"{self.name}.events", body, headers={"Nats-Msg-Id": self.message_id(n)}
        )

    async def close(self) -> None:
        nc, self.nc, self.js = self.nc, None, None
        if nc is not None:
            await nc.close()


PUBLISHERS: dict[type[BrokerCase], type[Publisher]] = {
    RedisCase: RedisPublisher,
    AmqpCase: AmqpPublisher,
    MqttCase: MqttPublisher,
    NatsCase: NatsPublisher,
}


def publisher(case: BrokerCase, name: str) -> Publisher:
    """The :class:`Publisher` of ``case``'s broker, publishing to ``name``."""
    return PUBLISHERS[type(case)](case, name)


def restart_broker(case: BrokerCase) -> None:
    """Stop ``case``'s broker and start it again on the same port with the same data
    (blocking: call it in a thread)."""
    server = case.server
    if hasattr(server, "restart"):
        server.restart()
    else:  # the Redis of the Redis Streams tests
        server.stop()
        server.start()
