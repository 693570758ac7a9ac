"""MQTT: ``mqtt.message_received``, one run per message published on a topic filter.

The trigger subscribes with QoS 1 (at least once) in a persistent session (aiomqtt over
paho-mqtt):

- a stable client id (by default derived from the workflow and its trigger step) and
  ``clean_start`` off (MQTT 5, with a ``session_expiry`` in seconds) or
  ``clean_session`` off (MQTT 3.1.1): the broker keeps the subscription and queues QoS 1
  messages for it while Railyard is away;
- acks are manual: the ``PUBACK`` of a message is sent only after ``emit`` returned (its
  run is stored). A message whose ``PUBACK`` never left (a crash, a lost connection) is
  sent again by the broker when the session reconnects, with its original packet id
  (MQTT 3.1.1 section 4.4, MQTT 5 section 4.4). Messages are stored one after the other:
  ``PUBACK`` packets must follow the order the messages arrived in (section 4.6).

Event id. MQTT 3.1.1 messages carry no id of their own, and a packet id is reused once
acked (it counts to 65,535 per session and starts over), so the id is, in order:

1. the MQTT 5 user property named ``id_property`` (default ``message_id``) when the
   publisher set it;
2. the top-level field ``id_field`` of a JSON payload (e.g. ``id``), when configured
   and present;
3. otherwise ``sha256:<hex>`` of the topic, the payload and the packet id. A redelivery
   has all three unchanged, so it is one run. Two different messages get the same id
   only when they carry the same payload on the same topic *and* the same packet id,
   which needs tens of thousands of messages in between: publishers of repeated,
   identical payloads should send an id (1 or 2) to keep every one of them.

QoS 0 messages (the publisher chose at most once) are never redelivered and get a random
id. Retained messages the broker replays on every subscribe are skipped (acked) unless
``include_retained`` is on; then their id is a hash of topic and payload, so the same
retained state is one run.

A payload that does not decode in the payload mode goes to the dead letters and is acked.
While Railyard is down the broker queues the session's QoS 1 messages (Mosquitto: up to
``max_queued_messages``, 1000 by default; persisted on disk with ``persistence true``).
"""

from __future__ import annotations

import ssl
import uuid
from typing import Annotated, Any, Literal, TypedDict

import aiomqtt
import msgspec
import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from connectors import sdk
from connectors.builtin.brokers.common import (
    NotValid,
    PayloadModeField,
    broker_connector,
    content_id,
    decode_payload,
    dial_host,
    disconnected,
    event_id,
    jsonable,
    login_type,
    parse_broker_url,
    stable_name,
    url_meta,
    url_validator,
)

__all__ = [
    "MQTT_LOGIN",
    "MqttConfig",
    "MqttMessage",
    "connector",
    "message_event",
    "message_received",
]

SCHEMES = {"mqtt": (1883, False), "tcp": (1883, False), "mqtts": (8883, True), "ssl": (8883, True)}

MQTT_LOGIN = login_type("mqtt.login", "MQTT login", "User name and password of an MQTT broker")


class MqttConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Config of ``mqtt.message_received``."""

    url: Annotated[str, url_meta("Broker URL", "mqtt://host:1883 (mqtts:// for TLS)")]
    topic: Annotated[
        str,
        msgspec.Meta(
            title="Topic filter",
            description="e.g. sensors/+/temperature or orders/#",
            min_length=1,
            max_length=65535,
        ),
    ]
    credential: Annotated[str | None, sdk.credential_meta("mqtt.login", title="Login")] = None
    client_id: Annotated[
        str,
        msgspec.Meta(
            title="Client id",
            description="Empty: an id derived from this workflow's trigger (recommended); "
            "it names the persistent session",
            max_length=65535,
        ),
    ] = ""
    protocol: Annotated[
        Literal["5", "3.1.1"],
        msgspec.Meta(
            title="MQTT version",
            extra_json_schema={"x-enum-labels": {"5": "MQTT 5", "3.1.1": "MQTT 3.1.1"}},
        ),
    ] = "5"
    session_expiry: Annotated[
        int,
        msgspec.Meta(
            title="Session kept for (s)",
            description="MQTT 5: how long the broker queues messages while Railyard is away",
            ge=60,
            le=4294967295,
        ),
    ] = 7 * 24 * 3600
    payload: PayloadModeField = "json"
    id_property: Annotated[
        str, msgspec.Meta(title="Id user property", description="MQTT 5 user property")
    ] = "message_id"
    id_field: Annotated[
        str, msgspec.Meta(title="Id field", description="Top-level field of a JSON payload")
    ] = ""
    include_retained: Annotated[
        bool,
        msgspec.Meta(
            title="Include retained messages",
            description="Start a run for the retained message the broker sends on subscribe",
        ),
    ] = False
    keepalive: Annotated[int, msgspec.Meta(title="Keepalive (s)", ge=5, le=3600)] = 60


class MqttProperties(TypedDict, total=False):
    """MQTT 5 properties the publisher set (absent ones are left out)."""

    content_type: str
    response_topic: str
    correlation_data: str
    user: dict[str, str]


class MqttMessage(TypedDict):
    """An MQTT message (the run input).

    ``payload``: decoded per the payload mode; ``topic``: the topic it was published on;
    ``properties``: its MQTT 5 properties (``user``: the user properties,
    ``correlation_data`` as text or base64); ``qos``: the QoS it was delivered with;
    ``retain``: a retained message replayed on subscribe; ``message_id``: the event id
    (the ``id_property`` user property, else the ``id_field`` of the payload, else
    ``sha256:`` and a hash of topic, payload and packet id).
    """

    payload: Any
    topic: str
    properties: MqttProperties
    qos: int
    retain: bool
    message_id: str


def _properties(message: aiomqtt.Message) -> dict[str, Any]:
    props = message.properties
    out: dict[str, Any] = {}
    if props is None:
        return out
    for attr, name in (
        ("ContentType", "content_type"),
        ("ResponseTopic", "response_topic"),
        ("CorrelationData", "correlation_data"),
    ):
        value = getattr(props, attr, None)
        if value is not None:
            out[name] = jsonable(value)
    user = getattr(props, "UserProperty", None)
    if user:
        out["user"] = {str(k): str(v) for k, v in user}
    return out


def message_id_of(config: MqttConfig, message: aiomqtt.Message, payload: Any = None) -> str:
    """The event id of ``message`` (``payload``: the decoded payload, when it decoded);
    see the module doc for the order."""
    user = dict(getattr(message.properties, "UserProperty", None) or [])
    if config.id_property and user.get(config.id_property):
        return event_id(str(user[config.id_property]))
    if config.id_field and isinstance(payload, dict):
        value = payload.get(config.id_field)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return event_id(str(value))
    body = _body(message)
    if message.retain:
        return content_id("retained", str(message.topic), body)
    if message.qos == 0:
        return f"qos0:{uuid.uuid4().hex}"
    return content_id(str(message.topic), body, str(message.mid))


def _body(message: aiomqtt.Message) -> bytes:
    payload = message.payload
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    return str(payload).encode()


def message_event(config: MqttConfig, message: aiomqtt.Message) -> sdk.TriggerEvent:
    """The event of ``message``; raises :class:`NotValid` when its payload does not
    decode."""
    payload = decode_payload(_body(message), config.payload)
    mid = message_id_of(config, message, payload)
    data: MqttMessage = {
        "payload": payload,
        "topic": str(message.topic),
        "properties": _properties(message),  # type: ignore[typeddict-item]
        "qos": int(message.qos),
        "retain": bool(message.retain),
        "message_id": mid,
    }
    return sdk.TriggerEvent(
        id=mid, data=data, meta={"message_id": mid, "topic": str(message.topic)}
    )


def _paho(client: aiomqtt.Client) -> paho.Client:
    """The paho-mqtt client under ``client`` (aiomqtt has no manual acks of its own)."""
    inner = getattr(client, "_client", None)
    if not isinstance(inner, paho.Client) or not hasattr(inner, "manual_ack_set"):
        raise RuntimeError("this aiomqtt version does not expose paho-mqtt's manual acks")
    return inner


def _refused(granted: Any) -> bool:
    for code in granted:
        value = getattr(code, "value", code)
        if isinstance(value, int) and value >= 0x80:
            return True
    return False


async def _subscribe(config: MqttConfig, client: aiomqtt.Client, emit: sdk.Emit) -> None:
    inner = _paho(client)
    granted = await client.subscribe(config.topic, qos=1)
    if _refused(granted):
        raise sdk.NonRetryableError(
            f"the MQTT broker refused the subscription to {config.topic!r}", kind="refused"
        )
    async for message in client.messages:
        if message.retain and not config.include_retained:
            pass  # replayed state, not an event
        else:
            try:
                event = message_event(config, message)
            except NotValid as bad:
                meta = {"message_id": message_id_of(config, message), "topic": str(message.topic)}
                await emit.dead_letter(bad.reason, _body(message), meta)
            else:
                await emit(event)
        if message.qos > 0:
            code = inner.ack(message.mid, message.qos)
            if code != paho.MQTT_ERR_SUCCESS:
                raise disconnected("the MQTT broker", paho.error_string(code))


@sdk.listen_trigger(
    "mqtt.message_received",
    label="MQTT: message received",
    kind="broker",
    validate=url_validator(SCHEMES),
    config=MqttConfig,
    category="MQTT",
    icon="radio",
    output=MqttMessage,
    output_example={
        "payload": {"sensor": "hall", "celsius": 21.5},
        "topic": "sensors/hall/temperature",
        "properties": {"content_type": "application/json", "user": {"message_id": "m-1"}},
        "qos": 1,
        "retain": False,
        "message_id": "m-1",
    },
)
async def message_received(config: MqttConfig, emit: sdk.Emit) -> None:
    """Start a run for each message published on an MQTT topic filter.

    QoS 1 in a persistent session; each message is acked after its run is stored."""
    url = parse_broker_url(config.url, SCHEMES)
    login = sdk.credential("credential") if config.credential else {}
    v5 = config.protocol == "5"
    properties = None
    if v5:
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = config.session_expiry
    client = aiomqtt.Client(
        await dial_host(url),
        url.port,
        username=login.get("username") or url.username or None,
        password=login.get("password") or None,
        identifier=config.client_id or stable_name("railyard"),
        protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311,
        clean_session=None if v5 else False,
        clean_start=False if v5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
        properties=properties,
        keepalive=config.keepalive,
        tls_context=ssl.create_default_context() if url.tls else None,
        timeout=10,
    )
    _paho(client).manual_ack_set(True)
    try:
        async with client:
            await _subscribe(config, client, emit)
    except aiomqtt.MqttCodeError as err:
        if getattr(err.rc, "value", err.rc) in (4, 5, 0x86, 0x87):  # bad login / not authorized
            raise sdk.NonRetryableError(f"the MQTT broker refused: {err}", kind="auth") from None
        raise disconnected("the MQTT broker", err) from err
    except aiomqtt.MqttError as err:
        raise disconnected("the MQTT broker", err) from err
    raise disconnected("the MQTT broker", "the message stream ended")


connector = broker_connector(
    message_received,
    MQTT_LOGIN,
    label="MQTT",
    description="Start runs from messages published on MQTT topics (QoS 1, persistent session)",
    docs_url="https://mqtt.org/mqtt-specification/",
)
