"""NATS JetStream: ``nats.message_received``, one run per message stored in a stream.

The trigger reads a JetStream stream through a durable pull consumer (nats-py) with
explicit acks:

- the consumer (``durable``, by default a name derived from the workflow and its trigger
  step) is created on first use with ``deliver`` ``new`` (messages stored from now on) or
  ``all`` (the whole stream), filtered on ``subject``, and ``ack_wait`` seconds; an
  existing consumer keeps its position and settings;
- messages are fetched ``batch`` at a time and stored one after the other, or
  ``concurrency`` at once; each is handed to ``emit`` and acked
  (``+ACK``) only after ``emit`` returned (its run is stored). While ``emit`` runs the
  trigger tells JetStream it is still working on the message (``+WPI``, every half
  ``ack_wait``), so a slow store is not taken for a crash. A message not acked within
  ``ack_wait`` (a crash, a lost connection) is delivered again.
- ``create_stream`` creates a missing stream (file storage, ``subject`` as its subject);
  off, a missing stream is an error.

Event id: the ``Nats-Msg-Id`` header when the publisher set it (JetStream's own
publish-deduplication id, so a publish retried by its publisher is one run too), else
``<stream>:<stream sequence>``; the stream sequence is unique in the stream and the same
on every redelivery.

A payload that does not decode in the payload mode goes to the dead letters and is
acked. Messages stay in the stream (by its retention) while Railyard is down.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import api

from connectors import sdk
from connectors.builtin.brokers.common import (
    ConcurrencyField,
    NotValid,
    PayloadModeField,
    broker_connector,
    decode_payload,
    dial_host,
    disconnected,
    event_id,
    handle_each,
    login_type,
    parse_broker_url,
    stable_name,
    url_host,
    url_meta,
    url_validator,
)

__all__ = [
    "NATS_LOGIN",
    "NatsConfig",
    "NatsLoginFields",
    "NatsMessage",
    "connector",
    "message_event",
    "message_received",
]

SCHEMES = {"nats": (4222, False), "tls": (4222, True)}
MSG_ID_HEADER = "Nats-Msg-Id"


class NatsLoginFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A NATS login: a user and password, or a token."""

    username: Annotated[str, msgspec.Meta(title="User")] = ""
    password: Annotated[str, sdk.secret("Password")] = ""
    token: Annotated[str, sdk.secret("Token", "Instead of user and password")] = ""


NATS_LOGIN = login_type(
    "nats.login", "NATS login", "User and password, or a token, of a NATS server", NatsLoginFields
)


class NatsConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Config of ``nats.message_received``."""

    url: Annotated[str, url_meta("Server URL", "nats://host:4222 (tls:// for TLS)")]
    stream: Annotated[str, msgspec.Meta(title="Stream", min_length=1, pattern=r"^[^.*>\s]+$")]
    subject: Annotated[
        str, msgspec.Meta(title="Subject", description="e.g. orders.> or orders.created")
    ] = ">"
    credential: Annotated[str | None, sdk.credential_meta("nats.login", title="Login")] = None
    durable: Annotated[
        str,
        msgspec.Meta(
            title="Durable consumer",
            description="Empty: a name derived from this workflow's trigger (recommended)",
            pattern=r"^[^.*>\s]*$",
        ),
    ] = ""
    deliver: Annotated[
        Literal["new", "all"],
        msgspec.Meta(
            title="A new consumer starts at",
            extra_json_schema={
                "x-enum-labels": {"new": "New messages", "all": "All stored messages"}
            },
        ),
    ] = "new"
    create_stream: Annotated[bool, msgspec.Meta(title="Create the stream when missing")] = False
    ack_wait: Annotated[float, msgspec.Meta(title="Ack wait (s)", ge=1, le=3600)] = 30.0
    batch: Annotated[int, msgspec.Meta(title="Messages per fetch", ge=1, le=1000)] = 20
    concurrency: ConcurrencyField = 1
    payload: PayloadModeField = "json"


class NatsMessage(TypedDict):
    """A JetStream message (the run input).

    ``payload``: decoded per the payload mode; ``headers``: the NATS headers;
    ``subject``: the subject it was published on; ``stream`` and ``sequence``: where it is
    stored; ``delivered``: how many times JetStream delivered it (2 or more: a
    redelivery); ``message_id``: the event id (the ``Nats-Msg-Id`` header, else
    ``<stream>:<sequence>``).
    """

    payload: Any
    headers: dict[str, str]
    subject: str
    stream: str
    sequence: int
    delivered: int
    message_id: str


def message_id_of(message: Msg) -> str:
    """The event id of ``message``: its ``Nats-Msg-Id`` header, else
    ``<stream>:<stream sequence>``."""
    header = (message.headers or {}).get(MSG_ID_HEADER)
    if header:
        return event_id(header)
    meta = message.metadata
    return event_id(f"{meta.stream}:{meta.sequence.stream}")


def message_event(config: NatsConfig, message: Msg) -> sdk.TriggerEvent:
    """The event of ``message``; raises :class:`NotValid` when its payload does not
    decode."""
    meta = message.metadata
    mid = message_id_of(message)
    data: NatsMessage = {
        "payload": decode_payload(message.data, config.payload),
        "headers": dict(message.headers or {}),
        "subject": message.subject,
        "stream": meta.stream,
        "sequence": int(meta.sequence.stream),
        "delivered": int(meta.num_delivered),
        "message_id": mid,
    }
    return sdk.TriggerEvent(
        id=mid,
        data=data,
        meta={"message_id": mid, "stream": meta.stream, "sequence": str(meta.sequence.stream)},
    )


@contextlib.asynccontextmanager
async def _working_on(message: Msg, every: float) -> AsyncIterator[None]:
    """Send ``+WPI`` (in progress) for ``message`` every ``every`` seconds meanwhile."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(every)
            await message.in_progress()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, nats.errors.Error):
            await task


async def _handle(config: NatsConfig, message: Msg, emit: sdk.Emit) -> None:
    async with _working_on(message, config.ack_wait / 2):
        try:
            event = message_event(config, message)
        except NotValid as bad:
            meta = {"message_id": message_id_of(message), "stream": config.stream}
            await emit.dead_letter(bad.reason, message.data, meta)
        else:
            await emit(event)
    await message.ack()


async def _consume(config: NatsConfig, nc: Any, emit: sdk.Emit) -> None:
    js = nc.jetstream()
    try:
        await js.stream_info(config.stream)
    except nats.js.errors.NotFoundError:
        if not config.create_stream:
            raise sdk.NonRetryableError(
                f"JetStream has no stream {config.stream!r} (turn on 'Create the stream')",
                kind="not_found",
            ) from None
        await js.add_stream(name=config.stream, subjects=[config.subject])
    consumer = api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy.NEW if config.deliver == "new" else api.DeliverPolicy.ALL,
        ack_policy=api.AckPolicy.EXPLICIT,
        ack_wait=config.ack_wait,
        max_ack_pending=max(config.batch * 10, 1000),
    )
    sub = await js.pull_subscribe(
        config.subject,
        durable=config.durable or stable_name("railyard"),
        stream=config.stream,
        config=consumer,
    )

    async def fetched() -> AsyncIterator[Msg]:
        while True:
            try:
                batch = await sub.fetch(config.batch, timeout=5)
            except nats.errors.TimeoutError:
                if nc.is_closed:
                    raise disconnected("NATS", "the connection closed") from None
                continue
            for message in batch:
                yield message

    async def handle(message: Msg) -> None:
        await _handle(config, message, emit)

    await handle_each(fetched(), handle, config.concurrency)


@sdk.listen_trigger(
    "nats.message_received",
    label="NATS JetStream: message received",
    kind="broker",
    validate=url_validator(SCHEMES),
    config=NatsConfig,
    category="NATS",
    icon="radio-tower",
    output=NatsMessage,
    output_example={
        "payload": {"order_id": "A-1001", "total": 42.5},
        "headers": {"Nats-Msg-Id": "order-A-1001"},
        "subject": "orders.created",
        "stream": "ORDERS",
        "sequence": 17,
        "delivered": 1,
        "message_id": "order-A-1001",
    },
)
async def message_received(config: NatsConfig, emit: sdk.Emit) -> None:
    """Start a run for each message stored in a NATS JetStream stream.

    A durable consumer; each message is acked after its run is stored."""
    url = parse_broker_url(config.url, SCHEMES)
    login = sdk.credential("credential") if config.credential else {}
    host = url_host(await dial_host(url))
    errors: list[Exception] = []

    async def on_error(err: Exception) -> None:  # nats-py reports connection errors here
        errors.append(err)
        sdk.logger().warning("NATS: %s", err or type(err).__name__)

    try:
        nc = await nats.connect(
            servers=[f"{url.scheme}://{host}:{url.port}"],
            user=login.get("username") or url.username or None,
            password=login.get("password") or None,
            token=login.get("token") or None,
            tls_hostname=url.host if url.tls else None,
            allow_reconnect=False,
            connect_timeout=10,
            max_reconnect_attempts=1,  # one try, then NoServersError (0 would retry forever)
            reconnect_time_wait=0.2,
            error_cb=on_error,
            name="railyard",
        )
    except (OSError, nats.errors.Error, TimeoutError) as err:
        if any(isinstance(e, nats.errors.AuthorizationError) for e in [err, *errors]):
            raise sdk.NonRetryableError("NATS refused the login", kind="auth") from None
        raise disconnected("NATS", errors[-1] if errors else err) from err
    try:
        await _consume(config, nc, emit)
    except (nats.errors.ConnectionClosedError, nats.errors.NoRespondersError) as err:
        raise disconnected("NATS", err) from err
    except (nats.errors.Error, OSError) as err:
        if nc.is_closed:
            raise disconnected("NATS", err) from err
        raise
    finally:
        if not nc.is_closed:
            with contextlib.suppress(nats.errors.Error, OSError):
                await nc.close()


connector = broker_connector(
    message_received,
    NATS_LOGIN,
    label="NATS JetStream",
    description="Start runs from messages stored in a NATS JetStream stream",
    docs_url="https://docs.nats.io/nats-concepts/jetstream/consumers",
)
