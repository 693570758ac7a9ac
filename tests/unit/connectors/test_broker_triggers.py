"""The broker triggers without a broker: declarations, config and SSRF refusals, payload
decoding, and the event-id rules for messages that carry no id of their own.

The subscriptions themselves are tested against real brokers in
tests/integration/brokers/.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import aiomqtt
import pytest
from aio_pika.message import IncomingMessage
from aiormq.abc import DeliveredMessage
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from pamqp import commands as spec
from pamqp.header import ContentHeader

from backend.services.connectors.node_reference import builtin_catalog
from backend.services.workflows.diagram_checks import trigger_diagnostics
from connectors import sdk
from connectors.builtin.brokers import amqp_queue, mqtt_topic, nats_jetstream, redis_streams
from connectors.builtin.brokers.common import (
    NotValid,
    content_id,
    decode_payload,
    event_id,
    jsonable,
    parse_broker_url,
)
from connectors.testing import TriggerTestEnvironment
from designer_schema.diagram import Diagram, Node
from tests.unit.connectors.output_schema import assert_declared_output

TRIGGERS = {
    "redis_streams": (redis_streams.message_received, {"stream": "s"}, "redis"),
    "amqp": (amqp_queue.message_received, {"queue": "q"}, "amqp"),
    "mqtt": (mqtt_topic.message_received, {"topic": "t/#"}, "mqtt"),
    "nats": (nats_jetstream.message_received, {"stream": "S"}, "nats"),
}


def test_each_broker_trigger_is_a_catalogued_broker_listener() -> None:
    catalog = builtin_catalog()
    for connector, (trig, _config, _scheme) in TRIGGERS.items():
        assert trig.type == f"{connector}.message_received"
        assert trig.kind == "broker" and trig.listen is not None
        spec_ = catalog.get(trig.type)
        assert spec_ is not None and spec_.kind == "trigger" and spec_.connector == connector
        assert catalog.triggers[trig.type] is trig
        assert_declared_output(trig, trig.output_example)  # type: ignore[arg-type]
        assert trig.output_json_schema()["properties"]["message_id"] == {"type": "string"}
    names = {c.name: c.credential_types for c in catalog.connectors}
    assert names["redis_streams"] == ["redis_streams.login"]
    assert names["amqp"] == ["amqp.login"]
    assert names["mqtt"] == ["mqtt.login"]
    assert names["nats"] == ["nats.login"]


@pytest.mark.parametrize("connector", sorted(TRIGGERS))
async def test_a_password_in_the_url_is_refused(connector: str) -> None:
    trig, config, scheme = TRIGGERS[connector]
    url = f"{scheme}://user:secret@127.0.0.1:1"
    with pytest.raises(sdk.ConfigError, match="put it in a credential"):
        await TriggerTestEnvironment().listen(trig, {**config, "url": url}, timeout=5)


@pytest.mark.parametrize("connector", sorted(TRIGGERS))
async def test_a_private_broker_is_refused_by_default(connector: str) -> None:
    trig, config, scheme = TRIGGERS[connector]
    env = TriggerTestEnvironment(ssrf=sdk.SsrfPolicy())
    with pytest.raises(sdk.NonRetryableError) as refused:
        await env.listen(trig, {**config, "url": f"{scheme}://10.0.0.8:1"}, timeout=5)
    assert refused.value.kind == "ssrf_blocked"
    assert "10.0.0.8" in refused.value.message and "private" in refused.value.message


def test_broker_urls() -> None:
    schemes = {"amqp": (5672, False), "amqps": (5671, True)}
    url = parse_broker_url("amqps://app@broker.example:5999/prod%2Feu", schemes)
    assert (url.host, url.port, url.path, url.username, url.tls) == (
        "broker.example",
        5999,
        "prod/eu",
        "app",
        True,
    )
    assert parse_broker_url("amqp://[::1]", schemes).port == 5672
    with pytest.raises(sdk.ConfigError, match=r"must start with amqp://, amqps://"):
        parse_broker_url("http://broker", schemes)
    with pytest.raises(sdk.ConfigError, match="no host"):
        parse_broker_url("amqp:///vhost", schemes)
    with pytest.raises(sdk.ConfigError, match="invalid broker URL"):
        parse_broker_url("amqp://broker:99999", schemes)


def test_payload_modes() -> None:
    assert decode_payload(b'{"a": [1, 2]}', "json") == {"a": [1, 2]}
    assert decode_payload("é".encode(), "text") == "é"
    assert decode_payload(b"\x00\xff", "base64") == "AP8="
    with pytest.raises(NotValid, match=r"^not JSON"):
        decode_payload(b"{", "json")
    with pytest.raises(NotValid, match=r"not UTF-8 text"):
        decode_payload(b"\xff", "text")
    with pytest.raises(ValueError, match="unknown payload mode"):
        decode_payload(b"", "xml")


def test_headers_become_json() -> None:
    value = {
        "at": datetime(2026, 1, 2, tzinfo=UTC),
        "raw": b"\xff",
        "text": b"hi",
        "n": Decimal("1.5"),
        "nan": float("nan"),
        "list": (1, b"x"),
        3: None,
    }
    assert jsonable(value) == {
        "at": "2026-01-02T00:00:00+00:00",
        "raw": "/w==",
        "text": "hi",
        "n": 1.5,
        "nan": "nan",
        "list": [1, "x"],
        "3": None,
    }


def test_content_ids_and_long_ids() -> None:
    assert content_id("ab", "c") != content_id("a", "bc")
    assert content_id(b"x") == content_id("x") and len(content_id("x")) == 71
    assert event_id("m-1") == "m-1"
    long = "x" * 201
    assert event_id(long) == content_id(long)
    with pytest.raises(ValueError):
        event_id("")


def _amqp_message(body: bytes, routing_key: str = "rk", **properties: Any) -> IncomingMessage:
    delivered = DeliveredMessage(
        delivery=spec.Basic.Deliver("tag", 1, False, "ex", routing_key),
        header=ContentHeader(properties=spec.Basic.Properties(**properties)),
        body=body,
        channel=None,  # type: ignore[arg-type]  # never acked here
    )
    return IncomingMessage(delivered)


def test_amqp_id_is_message_id_else_a_hash_of_what_a_redelivery_keeps() -> None:
    assert amqp_queue.message_id_of(_amqp_message(b"a", message_id="m-1")) == "m-1"
    plain = amqp_queue.message_id_of(_amqp_message(b"a"))
    assert plain.startswith("sha256:")
    assert plain == amqp_queue.message_id_of(_amqp_message(b"a"))
    assert plain != amqp_queue.message_id_of(_amqp_message(b"b"))
    assert plain != amqp_queue.message_id_of(_amqp_message(b"a", routing_key="other"))
    stamped = _amqp_message(b"a", timestamp=datetime(2026, 1, 1, tzinfo=UTC))
    assert plain != amqp_queue.message_id_of(stamped)


def _mqtt_message(
    payload: bytes, *, mid: int = 7, qos: int = 1, retain: bool = False, **user: str
) -> aiomqtt.Message:
    properties = None
    if user:
        properties = Properties(PacketTypes.PUBLISH)
        properties.UserProperty = list(user.items())
    return aiomqtt.Message("t/1", payload, qos, retain, mid, properties)


def test_mqtt_id_rules() -> None:
    config = mqtt_topic.MqttConfig(url="mqtt://h", topic="t/#", id_field="id")
    ids = mqtt_topic.message_id_of
    assert ids(config, _mqtt_message(b"{}", message_id="p-1"), {"id": "f-1"}) == "p-1"
    assert ids(config, _mqtt_message(b"{}"), {"id": "f-1"}) == "f-1"
    assert ids(config, _mqtt_message(b"{}"), {"id": True}).startswith("sha256:")
    # QoS 1 without an id: the same packet id, topic and payload (a redelivery) only
    hashed = ids(config, _mqtt_message(b"x"))
    assert hashed == ids(config, _mqtt_message(b"x"))
    assert hashed != ids(config, _mqtt_message(b"x", mid=8))
    assert hashed != ids(config, _mqtt_message(b"y"))
    # QoS 0 is never redelivered: every delivery is its own event
    assert ids(config, _mqtt_message(b"x", qos=0)) != ids(config, _mqtt_message(b"x", qos=0))
    # a retained state is one event whatever packet id it is replayed with
    assert ids(config, _mqtt_message(b"s", retain=True)) == ids(
        config, _mqtt_message(b"s", retain=True, mid=9)
    )


def _trigger_only(node_type: str, config: dict[str, Any]) -> Diagram:
    return Diagram(nodes=[Node(id="t", type=node_type, config=config)], edges=[])


@pytest.mark.parametrize("connector", sorted(TRIGGERS))
@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("{scheme}://:secret@127.0.0.1:1", "put it in a credential"),
        ("http://127.0.0.1:1", "broker URL must start with {scheme}://"),
    ],
)
def test_a_broker_url_that_cannot_work_is_a_compile_error(
    connector: str, url: str, says: str
) -> None:
    trig, config, scheme = TRIGGERS[connector]
    diagram = _trigger_only(trig.type, {**config, "url": url.format(scheme=scheme)})
    found = trigger_diagnostics(diagram, builtin_catalog())
    assert [(d.severity, d.code, d.node_id, d.field) for d in found] == [
        ("error", "invalid_config", "t", "url")
    ]
    assert says.format(scheme=scheme) in found[0].message


@pytest.mark.parametrize("connector", sorted(TRIGGERS))
def test_a_good_broker_url_compiles(connector: str) -> None:
    trig, config, scheme = TRIGGERS[connector]
    diagram = _trigger_only(trig.type, {**config, "url": f"{scheme}://user@127.0.0.1:1"})
    assert trigger_diagnostics(diagram, builtin_catalog()) == []


def test_a_redis_url_whose_path_is_no_database_number_is_a_compile_error() -> None:
    diagram = _trigger_only(
        "redis_streams.message_received", {"stream": "s", "url": "redis://127.0.0.1/orders"}
    )
    found = trigger_diagnostics(diagram, builtin_catalog())
    assert [(d.code, d.field) for d in found] == [("invalid_config", "url")]
    assert "database number" in found[0].message
