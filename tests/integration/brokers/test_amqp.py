"""RabbitMQ trigger: the message_id property as the event id, an exchange binding,
headers and properties as JSON, and a queue that must exist, against a real RabbitMQ."""

from __future__ import annotations

from datetime import UTC, datetime

import aio_pika
import pytest

from connectors import sdk
from connectors.builtin.brokers.amqp_queue import message_received
from connectors.testing import TriggerTestEnvironment
from tests.integration.brokers.cases import LISTEN_TIMEOUT, AmqpCase, fresh_name

pytestmark = [pytest.mark.brokers, pytest.mark.xdist_group("amqp")]


async def test_ids_binding_headers_and_properties(amqp_case: AmqpCase) -> None:
    queue, exchange = fresh_name("q"), fresh_name("ex")
    config = {
        **amqp_case.config(queue),
        "exchange": exchange,
        "binding_key": "order.*",
        "payload": "text",
    }
    connection = await aio_pika.connect(amqp_case.server.url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        ex = await channel.declare_exchange(exchange, aio_pika.ExchangeType.TOPIC, durable=True)
        env = TriggerTestEnvironment()
        with pytest.raises(TimeoutError):  # declares and binds the queue
            await env.listen(message_received, config, timeout=3)
        sent = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        await ex.publish(
            aio_pika.Message(
                b"first",
                message_id="order-1",
                content_type="text/plain",
                headers={"tenant": "t1", "at": sent, "raw": bytearray(b"\xff")},
            ),
            routing_key="order.created",
        )
        await ex.publish(aio_pika.Message(b"second", timestamp=sent), routing_key="order.paid")
        await ex.publish(aio_pika.Message(b"third", timestamp=sent), routing_key="order.paid")
        await ex.publish(aio_pika.Message(b"unbound"), routing_key="invoice.sent")

    got = await env.listen(message_received, config, count=3, timeout=LISTEN_TIMEOUT)
    first, second, third = got.events
    assert first.id == "order-1"
    assert first.data == {
        "payload": "first",
        "headers": {"tenant": "t1", "at": "2026-01-02T03:04:05+00:00", "raw": "/w=="},
        "properties": {
            "content_type": "text/plain",
            "message_id": "order-1",
            "priority": 0,
            "delivery_mode": 1,
        },
        "exchange": exchange,
        "routing_key": "order.created",
        "queue": queue,
        "message_id": "order-1",
        "redelivered": False,
    }
    # aio-pika's publisher gives every message a random message_id (the hash fallback for
    # publishers that set none: tests/unit/connectors/test_broker_triggers.py)
    assert second.id == second.data["properties"]["message_id"] != third.id
    assert second.data["properties"]["timestamp"] == "2026-01-02T03:04:05+00:00"


async def test_a_queue_that_must_exist(amqp_case: AmqpCase) -> None:
    config = {**amqp_case.config(fresh_name("missing")), "declare": False}
    with pytest.raises(sdk.NonRetryableError) as missing:
        await TriggerTestEnvironment().listen(message_received, config, timeout=LISTEN_TIMEOUT)
    assert missing.value.kind == "not_found"
