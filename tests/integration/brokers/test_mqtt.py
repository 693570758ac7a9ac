"""MQTT trigger: where the event id comes from (a user property, a JSON field, else a
hash), retained messages, and an MQTT 3.1.1 persistent session, against a real Mosquitto."""

from __future__ import annotations

import pytest

from connectors.builtin.brokers.mqtt_topic import message_received
from connectors.testing import TriggerTestEnvironment
from tests.integration.brokers.cases import LISTEN_TIMEOUT, MqttCase, fresh_name

pytestmark = [pytest.mark.brokers, pytest.mark.xdist_group("mqtt")]


async def test_event_ids_from_property_field_or_hash(mqtt_case: MqttCase) -> None:
    name = fresh_name("ids")
    config = {**mqtt_case.config(name), "id_field": "id"}
    await mqtt_case.prepare(name)
    await mqtt_case.publish(name, b'{"id": "from-field"}', user={"message_id": "from-prop"})
    await mqtt_case.publish(name, b'{"id": 42}')
    await mqtt_case.publish(name, b'{"no": "id"}')

    got = await TriggerTestEnvironment().listen(
        message_received, config, count=3, timeout=LISTEN_TIMEOUT
    )
    ids = [e.id for e in got.events]
    assert ids[:2] == ["from-prop", "42"]
    assert ids[2].startswith("sha256:")
    assert got.events[0].data["properties"] == {"user": {"message_id": "from-prop"}}
    assert [e.data["qos"] for e in got.events] == [1, 1, 1]
    assert got.events[0].data["topic"] == f"{name}/events"


async def test_retained_messages_are_skipped_unless_included(mqtt_case: MqttCase) -> None:
    name = fresh_name("ret")
    await mqtt_case.publish(name, b'"state"', retain=True)
    env = TriggerTestEnvironment()
    skipping = mqtt_case.config(name)
    await mqtt_case.prepare(name)
    await mqtt_case.publish(name, b'"event"')
    got = await env.listen(message_received, skipping, timeout=LISTEN_TIMEOUT)
    assert [e.data["payload"] for e in got.events] == ["event"]

    including = {
        **mqtt_case.config(fresh_name("inc")),
        "topic": f"{name}/#",
        "include_retained": True,
    }
    first = await env.listen(message_received, including, timeout=LISTEN_TIMEOUT)
    again = await env.listen(message_received, including, timeout=LISTEN_TIMEOUT)
    assert [e.data["payload"] for e in first.events] == ["state"]
    assert first.events[0].data["retain"] is True
    assert first.events[0].id == again.events[0].id  # the same retained state: one run


async def test_mqtt_311_persistent_session_redelivers(mqtt_case: MqttCase) -> None:
    name = fresh_name("v311")
    config = {**mqtt_case.config(name), "protocol": "3.1.1"}
    env = TriggerTestEnvironment()
    with pytest.raises(TimeoutError):
        await env.listen(message_received, config, timeout=2)
    await mqtt_case.publish(name, b'{"n": 1}')
    await mqtt_case.publish(name, b'{"n": 2}')
    first = await env.listen(message_received, config, timeout=LISTEN_TIMEOUT)
    second = await env.listen(message_received, config, count=2, timeout=LISTEN_TIMEOUT)
    assert [e.data["payload"] for e in first.events] == [{"n": 1}]
    assert [e.data["payload"] for e in second.events] == [{"n": 1}, {"n": 2}]
    assert second.events[0].id == first.events[0].id
