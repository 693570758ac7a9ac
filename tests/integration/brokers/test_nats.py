"""NATS JetStream trigger: the Nats-Msg-Id header or the stream sequence as the event
id, the delivery count, and a missing stream, against a real nats-server."""

from __future__ import annotations

import pytest

from connectors import sdk
from connectors.builtin.brokers.nats_jetstream import message_received
from connectors.testing import TriggerTestEnvironment
from tests.integration.brokers.cases import LISTEN_TIMEOUT, NatsCase, fresh_name

pytestmark = [pytest.mark.brokers, pytest.mark.xdist_group("nats")]


async def test_ids_from_header_or_stream_sequence(nats_case: NatsCase) -> None:
    name = fresh_name("ORD")
    config = {**nats_case.config(name), "payload": "base64"}
    await nats_case.prepare(name)
    await nats_case.publish(name, b"\x00one", headers={"Nats-Msg-Id": "order-1", "k": "v"})
    await nats_case.publish(name, b"two")
    env = TriggerTestEnvironment()

    got = await env.listen(message_received, config, count=2, timeout=LISTEN_TIMEOUT)
    first, second = got.events
    assert first.id == "order-1"
    assert first.data == {
        "payload": "AG9uZQ==",
        "headers": {"Nats-Msg-Id": "order-1", "k": "v"},
        "subject": f"{name}.events",
        "stream": name,
        "sequence": 1,
        "delivered": 1,
        "message_id": "order-1",
    }
    assert second.id == f"{name}:2"
    assert second.meta == {"message_id": f"{name}:2", "stream": name, "sequence": "2"}

    again = await env.listen(message_received, config, timeout=LISTEN_TIMEOUT)
    assert [(e.id, e.data["delivered"]) for e in again.events] == [(f"{name}:2", 2)]


async def test_a_missing_stream_is_refused_or_created(nats_case: NatsCase) -> None:
    name = fresh_name("NEW")
    config = nats_case.config(name)
    env = TriggerTestEnvironment()
    with pytest.raises(sdk.NonRetryableError) as missing:
        await env.listen(message_received, config, timeout=LISTEN_TIMEOUT)
    assert missing.value.kind == "not_found"

    with pytest.raises(TimeoutError):  # creates the stream and the consumer
        await env.listen(message_received, {**config, "create_stream": True}, timeout=2)
    await nats_case.publish(name, b'{"n": 1}')
    got = await env.listen(message_received, config, timeout=LISTEN_TIMEOUT)
    assert [e.data["payload"] for e in got.events] == [{"n": 1}]
