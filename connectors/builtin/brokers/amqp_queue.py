"""RabbitMQ (AMQP 0-9-1): ``amqp.message_received``, one run per queued message.

The trigger consumes one queue with manual acknowledgements (aio-pika):

- ``declare`` (default on) declares the queue durable if it does not exist; off, the
  queue must exist (a passive declare checks it). ``exchange`` and ``binding_key`` bind
  the queue to an exchange first (``binding_key`` ``#`` on a topic exchange: every
  message).
- ``prefetch`` is how many unacked messages RabbitMQ hands the subscription at once
  (``basic.qos``); they are stored one after the other, or ``concurrency`` at once
  (their runs then start in any order).
- Each message is handed to ``emit`` and acked (``basic.ack``) only after ``emit``
  returned (its run is stored). When the subscription ends before the ack (a crash, a
  lost connection, a new workflow version), RabbitMQ puts the message back in the queue
  and delivers it again, flagged ``redelivered``.

Event id, the same on every delivery of one message:

- the message's ``message_id`` property when the publisher set one (recommended: it is
  what makes two publishes of one business event one run too);
- otherwise ``sha256:<hex>`` of the body, the exchange, the routing key and the
  ``timestamp``, ``correlation_id``, ``type`` and ``app_id`` properties (none of which
  RabbitMQ changes on redelivery). Two messages published with the same body, routing
  and properties and no ``message_id`` then count as one event: give such messages a
  ``message_id`` or a ``timestamp``.

A message whose body does not decode in the payload mode goes to the dead letters and is
acked. A message stays in the queue, durable when published persistent
(``delivery_mode`` 2) to a durable queue, while Railyard is down.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import aio_pika
import aio_pika.exceptions
import aiormq.exceptions
import msgspec
from aio_pika.abc import AbstractIncomingMessage

from connectors import sdk
from connectors.builtin.brokers.common import (
    ConcurrencyField,
    NotValid,
    PayloadModeField,
    broker_connector,
    content_id,
    decode_payload,
    dial_host,
    disconnected,
    event_id,
    handle_each,
    jsonable,
    login_type,
    parse_broker_url,
    url_meta,
    url_validator,
)

__all__ = [
    "AMQP_LOGIN",
    "AmqpConfig",
    "AmqpMessage",
    "connector",
    "message_event",
    "message_received",
]

SCHEMES = {"amqp": (5672, False), "amqps": (5671, True)}
PROPERTIES = (
    "content_type",
    "content_encoding",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "timestamp",
    "type",
    "user_id",
    "app_id",
    "priority",
    "delivery_mode",
)

AMQP_LOGIN = login_type(
    "amqp.login", "RabbitMQ login", "User name and password of a RabbitMQ (AMQP 0-9-1) broker"
)


class AmqpConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Config of ``amqp.message_received``."""

    url: Annotated[str, url_meta("Broker URL", "amqp://host:5672/vhost (amqps:// for TLS)")]
    queue: Annotated[str, msgspec.Meta(title="Queue", min_length=1, max_length=255)]
    credential: Annotated[str | None, sdk.credential_meta("amqp.login", title="Login")] = None
    declare: Annotated[
        bool,
        msgspec.Meta(
            title="Declare the queue",
            description="Create it (durable) when missing; off: it must exist",
        ),
    ] = True
    exchange: Annotated[
        str, msgspec.Meta(title="Bind to exchange", description="Empty: no binding")
    ] = ""
    binding_key: Annotated[str, msgspec.Meta(title="Binding key")] = "#"
    prefetch: Annotated[int, msgspec.Meta(title="Prefetch", ge=1, le=1000)] = 20
    concurrency: ConcurrencyField = 1
    payload: PayloadModeField = "json"


class AmqpProperties(TypedDict, total=False):
    """The AMQP basic properties the publisher set (absent ones are left out)."""

    content_type: str
    content_encoding: str
    correlation_id: str
    reply_to: str
    expiration: str
    message_id: str
    timestamp: str
    type: str
    user_id: str
    app_id: str
    priority: int
    delivery_mode: int


class AmqpMessage(TypedDict):
    """A message taken from a RabbitMQ queue (the run input).

    ``payload``: the body decoded per the payload mode; ``headers``: the message's
    headers table as JSON; ``properties``: its basic properties (``timestamp`` as
    ISO 8601 text); ``exchange`` and ``routing_key``: where it was published;
    ``queue``: the queue it was taken from; ``message_id``: the event id (the message's
    ``message_id`` property, else ``sha256:`` and a hash of its body, routing and
    properties); ``redelivered``: RabbitMQ delivered it before.
    """

    payload: Any
    headers: dict[str, Any]
    properties: AmqpProperties
    exchange: str
    routing_key: str
    queue: str
    message_id: str
    redelivered: bool


def _properties(message: AbstractIncomingMessage) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in PROPERTIES:
        value = getattr(message, name, None)
        if value is None or value == "":
            continue
        if name == "expiration":
            value = str(value)
        elif name == "delivery_mode":
            value = int(value)
        out[name] = jsonable(value)
    return out


def message_id_of(message: AbstractIncomingMessage) -> str:
    """The event id of ``message``: its ``message_id`` property, else a hash of what a
    redelivery keeps (see the module doc)."""
    if message.message_id:
        return event_id(str(message.message_id))
    timestamp = message.timestamp.isoformat() if message.timestamp else ""
    return content_id(
        message.body,
        message.exchange or "",
        message.routing_key or "",
        timestamp,
        message.correlation_id or "",
        message.type or "",
        message.app_id or "",
    )


def message_event(config: AmqpConfig, message: AbstractIncomingMessage) -> sdk.TriggerEvent:
    """The event of ``message``; raises :class:`NotValid` when its body does not decode."""
    mid = message_id_of(message)
    data: AmqpMessage = {
        "payload": decode_payload(message.body, config.payload),
        "headers": jsonable(dict(message.headers or {})),
        "properties": _properties(message),  # type: ignore[typeddict-item]
        "exchange": message.exchange or "",
        "routing_key": message.routing_key or "",
        "queue": config.queue,
        "message_id": mid,
        "redelivered": bool(message.redelivered),
    }
    return sdk.TriggerEvent(id=mid, data=data, meta={"message_id": mid, "queue": config.queue})


async def _consume(config: AmqpConfig, channel: Any, emit: sdk.Emit) -> None:
    await channel.set_qos(prefetch_count=config.prefetch)
    queue = await channel.declare_queue(config.queue, durable=True, passive=not config.declare)
    if config.exchange:
        await queue.bind(config.exchange, routing_key=config.binding_key)

    async def handle(message: AbstractIncomingMessage) -> None:
        try:
            event = message_event(config, message)
        except NotValid as bad:
            mid = message_id_of(message)
            await emit.dead_letter(
                bad.reason, message.body, {"message_id": mid, "queue": config.queue}
            )
        else:
            await emit(event)
        await message.ack()

    async with queue.iterator() as messages:
        await handle_each(aiter(messages), handle, config.concurrency)


@sdk.listen_trigger(
    "amqp.message_received",
    label="RabbitMQ: message received",
    kind="broker",
    validate=url_validator(SCHEMES),
    config=AmqpConfig,
    category="RabbitMQ",
    icon="rabbit",
    output=AmqpMessage,
    output_example={
        "payload": {"order_id": "A-1001", "total": 42.5},
        "headers": {"source": "shop"},
        "properties": {"content_type": "application/json", "message_id": "order-A-1001"},
        "exchange": "orders",
        "routing_key": "order.created",
        "queue": "railyard-orders",
        "message_id": "order-A-1001",
        "redelivered": False,
    },
)
async def message_received(config: AmqpConfig, emit: sdk.Emit) -> None:
    """Start a run for each message taken from a RabbitMQ queue.

    Each message is acked after its run is stored."""
    url = parse_broker_url(config.url, SCHEMES)
    login = sdk.credential("credential") if config.credential else {}
    try:
        connection = await aio_pika.connect(
            host=await dial_host(url),
            port=url.port,
            login=login.get("username") or url.username or "guest",
            password=login.get("password") or "guest",
            virtualhost=url.path or "/",
            ssl=url.tls,
            timeout=10,
            client_properties={"connection_name": f"railyard {config.queue}"},
        )
    except aiormq.exceptions.ProbableAuthenticationError as err:
        raise sdk.NonRetryableError(f"RabbitMQ refused the login: {err}", kind="auth") from None
    except (OSError, aiormq.exceptions.AMQPConnectionError, TimeoutError) as err:
        raise disconnected("RabbitMQ", err) from err
    try:
        async with connection:
            channel = await connection.channel()
            await _consume(config, channel, emit)
    except aiormq.exceptions.ChannelNotFoundEntity as err:
        raise sdk.NonRetryableError(f"RabbitMQ: {err}", kind="not_found") from None
    except aiormq.exceptions.ChannelPreconditionFailed as err:
        raise sdk.NonRetryableError(
            f"RabbitMQ refused the queue's declaration: {err}", kind="precondition_failed"
        ) from None
    except (
        OSError,
        aiormq.exceptions.AMQPError,
        aio_pika.exceptions.ChannelInvalidStateError,
        TimeoutError,
    ) as err:
        raise disconnected("RabbitMQ", err) from err
    # the iterator ends when the channel or connection closes
    raise disconnected("RabbitMQ", "the channel closed")


connector = broker_connector(
    message_received,
    AMQP_LOGIN,
    label="RabbitMQ (AMQP)",
    description="Start runs from messages in a RabbitMQ (AMQP 0-9-1) queue",
    docs_url="https://www.rabbitmq.com/docs/consumers",
)
