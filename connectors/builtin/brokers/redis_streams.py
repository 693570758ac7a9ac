"""Redis Streams: ``redis_streams.message_received``, one run per stream entry.

The trigger reads a stream as a member of a consumer group (``XREADGROUP``):

1. The group is created if missing (``XGROUP CREATE ... MKSTREAM``), starting at new
   entries (``start: new``, id ``$``) or at the stream's first entry (``start: all``).
   An existing group keeps its position.
2. First the consumer re-reads its own pending entries (id ``0``): the entries it was
   given before a crash or a disconnect and never acked.
3. Then, every ``claim_idle`` seconds, it takes over entries another consumer of the
   group left pending for longer than ``claim_idle`` (``XAUTOCLAIM``): a consumer that
   died (a pod that went away) loses nothing.
4. Otherwise it blocks on new entries (id ``>``), ``batch`` at a time.

Entries are stored one after the other, or ``concurrency`` at once (their runs then
start in any order).

Each entry is handed to ``emit`` and ``XACK``-ed only after ``emit`` returned (its run is
stored). Event id: ``<stream>:<entry id>`` (e.g. ``orders:1712000000000-0``): Redis assigns
each entry a unique id in its stream and a redelivered entry keeps it, so the product
starts one run per entry whatever crashes happen between the run and the ``XACK``.

The consumer name defaults to a name derived from the workflow and its trigger step (the
same after a restart or a new version, so step 2 finds what the last subscription left);
name consumers yourself only to share a group between workflows on purpose.

Payload (``payload``): ``fields``: the entry's fields as a map of text; ``json``,
``text``, ``base64``: the value of the field ``payload_field`` decoded so, the other
fields in ``fields``. An entry whose field is missing or does not decode goes to the dead
letters and is acked. Entries deleted while pending (``XDEL``) are acked and skipped.

What stays in Redis when Railyard is down: the stream and the group's pending entries,
as durable as the Redis server's persistence (AOF) makes them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import redis.exceptions
from redis.asyncio import Redis

from connectors import sdk
from connectors.builtin.brokers.common import (
    BrokerUrl,
    ConcurrencyField,
    NotValid,
    PayloadMode,
    broker_connector,
    decode_payload,
    dial_host,
    disconnected,
    event_id,
    handle_each,
    login_type,
    parse_broker_url,
    stable_name,
    url_meta,
)

__all__ = [
    "REDIS_LOGIN",
    "RedisLoginFields",
    "RedisStreamsConfig",
    "StreamEntry",
    "connector",
    "message_received",
    "redis_url",
]

SCHEMES = {"redis": (6379, False), "rediss": (6379, True)}


class RedisLoginFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Redis login: a password (``requirepass``), with a user name for Redis ACL users."""

    password: Annotated[str, sdk.secret("Password")]
    username: Annotated[
        str, msgspec.Meta(title="Username", description="Empty for the default user")
    ] = ""


REDIS_LOGIN = login_type(
    "redis_streams.login",
    "Redis login",
    "Password (and ACL user) of a Redis server",
    RedisLoginFields,
)


class RedisStreamsConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Config of ``redis_streams.message_received``."""

    url: Annotated[str, url_meta("Redis URL", "redis://host:6379/0 (rediss:// for TLS)")]
    stream: Annotated[str, msgspec.Meta(title="Stream", min_length=1)]
    credential: Annotated[
        str | None, sdk.credential_meta("redis_streams.login", title="Redis login")
    ] = None
    group: Annotated[str, msgspec.Meta(title="Consumer group", min_length=1)] = "railyard"
    consumer: Annotated[
        str,
        msgspec.Meta(
            title="Consumer name",
            description="Empty: a name derived from this workflow's trigger (recommended)",
        ),
    ] = ""
    start: Annotated[
        Literal["new", "all"],
        msgspec.Meta(
            title="A new group starts at",
            description="new: entries added from now on; all: every entry in the stream",
            extra_json_schema={"x-enum-labels": {"new": "New entries", "all": "All entries"}},
        ),
    ] = "new"
    payload: Annotated[
        Literal["fields", "json", "text", "base64"],
        msgspec.Meta(
            title="Payload",
            description="fields: the entry's fields as text; json, text, base64: the field "
            "named below, decoded so",
        ),
    ] = "fields"
    payload_field: Annotated[str, msgspec.Meta(title="Payload field", min_length=1)] = "payload"
    batch: Annotated[int, msgspec.Meta(title="Entries per read", ge=1, le=1000)] = 50
    concurrency: ConcurrencyField = 1
    block: Annotated[float, msgspec.Meta(title="Wait per read (s)", gt=0, le=60)] = 5.0
    claim_idle: Annotated[
        float,
        msgspec.Meta(
            title="Take over entries idle for (s)",
            description="Entries another consumer left pending this long are taken over; "
            "0 turns it off",
            ge=0,
        ),
    ] = 60.0


class StreamEntry(TypedDict):
    """A stream entry read by the trigger (the run input).

    ``payload``: the decoded payload (see the ``payload`` setting); ``fields``: the
    entry's other fields as text (every field in ``fields`` mode); ``stream``: the stream
    name; ``entry_id``: the id Redis assigned the entry (``<ms>-<seq>``); ``message_id``:
    the event id, ``<stream>:<entry id>``.
    """

    payload: Any
    fields: dict[str, str]
    stream: str
    entry_id: str
    message_id: str


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def entry_event(config: RedisStreamsConfig, entry_id: str, fields: dict[bytes, bytes]) -> Any:
    """The :class:`~connectors.sdk.TriggerEvent` of one entry; raises :class:`NotValid`
    when the payload field is missing or does not decode."""
    if config.payload == "fields":
        try:
            payload: Any = {k.decode("utf-8"): v.decode("utf-8") for k, v in fields.items()}
        except UnicodeDecodeError:
            raise NotValid("a field is not UTF-8 text (use the base64 payload mode)") from None
        others = dict(payload)
    else:
        key = config.payload_field.encode()
        if key not in fields:
            raise NotValid(f"the entry has no field {config.payload_field!r}")
        mode: PayloadMode = config.payload
        payload = decode_payload(fields[key], mode)
        others = {_text(k): _text(v) for k, v in fields.items() if k != key}
    mid = entry_event_id(config.stream, entry_id)
    data: StreamEntry = {
        "payload": payload,
        "fields": others,
        "stream": config.stream,
        "entry_id": entry_id,
        "message_id": mid,
    }
    return sdk.TriggerEvent(id=mid, data=data, meta={"message_id": mid, "stream": config.stream})


def entry_event_id(stream: str, entry_id: str) -> str:
    """The event id of entry ``entry_id`` of ``stream``: ``<stream>:<entry id>``."""
    return event_id(f"{stream}:{entry_id}")


class _Subscription:
    """One consumer's reads, emits and acks over one connection."""

    def __init__(self, config: RedisStreamsConfig, client: Redis, emit: sdk.Emit) -> None:
        self.config = config
        self.client = client
        self.emit = emit
        self.consumer = config.consumer or stable_name("railyard")

    async def ensure_group(self) -> None:
        start = "$" if self.config.start == "new" else "0"
        try:
            await self.client.xgroup_create(
                self.config.stream, self.config.group, id=start, mkstream=True
            )
        except redis.exceptions.ResponseError as err:
            if "BUSYGROUP" not in str(err):
                raise

    async def handle(self, entry: tuple[Any, Any]) -> None:
        """Emit, then ack, one entry; dead-letter (then ack) an invalid one."""
        raw_id, fields = entry
        if raw_id is None:
            return  # a deleted entry in an XAUTOCLAIM answer: already off the list
        entry_id = _text(raw_id)
        if fields:
            try:
                event = entry_event(self.config, entry_id, fields)
            except NotValid as bad:
                key = self.config.payload_field.encode()
                raw = fields.get(key) if self.config.payload != "fields" else None
                await self.emit.dead_letter(
                    bad.reason,
                    raw if raw is not None else msgspec.json.encode(_fields_text(fields)),
                    {
                        "message_id": entry_event_id(self.config.stream, entry_id),
                        "stream": self.config.stream,
                    },
                )
            else:
                await self.emit(event)
        await self.client.xack(self.config.stream, self.config.group, raw_id)

    async def read(self, last_id: str, *, block: bool) -> list[tuple[Any, Any]]:
        reply = await self.client.xreadgroup(
            self.config.group,
            self.consumer,
            {self.config.stream: last_id},
            count=self.config.batch,
            block=int(self.config.block * 1000) if block else None,
        )
        return list(reply[0][1]) if reply else []

    async def pending(self) -> AsyncIterator[tuple[Any, Any]]:
        """This consumer's own pending entries (id ``0`` onwards): what it was given
        before and never acked."""
        last = "0"
        while entries := await self.read(last, block=False):
            for entry in entries:
                yield entry
            last = _text(entries[-1][0])

    async def claimed(self) -> AsyncIterator[tuple[Any, Any]]:
        """The group's entries idle for ``claim_idle`` seconds, taken over (XAUTOCLAIM)."""
        start: Any = "0-0"
        while True:
            reply = await self.client.xautoclaim(
                self.config.stream,
                self.config.group,
                self.consumer,
                min_idle_time=int(self.config.claim_idle * 1000),
                start_id=start,
                count=self.config.batch,
            )
            start = reply[0]
            for entry in reply[1]:
                yield entry
            if _text(start) == "0-0":
                return

    async def entries(self) -> AsyncIterator[tuple[Any, Any]]:
        """Every entry to handle, in the order of the module doc (never ends)."""
        await self.ensure_group()
        async for entry in self.pending():
            yield entry
        next_claim = 0.0
        while True:
            if self.config.claim_idle and time.monotonic() >= next_claim:
                async for entry in self.claimed():
                    yield entry
                next_claim = time.monotonic() + max(self.config.claim_idle / 2, 1.0)
            for entry in await self.read(">", block=True):
                yield entry

    async def run(self) -> None:
        await handle_each(self.entries(), self.handle, self.config.concurrency)


def _fields_text(fields: dict[bytes, bytes]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in fields.items()}


def redis_url(config: RedisStreamsConfig) -> tuple[BrokerUrl, int]:
    """The parsed ``url`` of ``config`` and its database number (the path, 0 when empty).

    Raises :class:`~connectors.sdk.ConfigError` (field ``url``) as
    :func:`~connectors.builtin.brokers.common.parse_broker_url` does, and for a path that
    is not a number. Also the trigger's ``validate`` hook (a compile error)."""
    url = parse_broker_url(config.url, SCHEMES)
    try:
        return url, int(url.path or 0)
    except ValueError:
        raise sdk.ConfigError(
            f"the Redis URL's path must be a database number: {url.path!r}",
            details={"field": "url"},
        ) from None


@sdk.listen_trigger(
    "redis_streams.message_received",
    label="Redis Streams: message received",
    kind="broker",
    validate=redis_url,
    config=RedisStreamsConfig,
    category="Redis",
    icon="database",
    output=StreamEntry,
    output_example={
        "payload": {"order_id": "A-1001", "total": 42.5},
        "fields": {"source": "shop"},
        "stream": "orders",
        "entry_id": "1712000000000-0",
        "message_id": "orders:1712000000000-0",
    },
)
async def message_received(config: RedisStreamsConfig, emit: sdk.Emit) -> None:
    """Start a run for each entry added to a Redis stream.

    A consumer group; each entry is acked after its run is stored."""
    url, db = redis_url(config)
    login = sdk.credential("credential") if config.credential else {}
    client = Redis(
        host=await dial_host(url),
        port=url.port,
        db=db,
        username=login.get("username") or url.username or None,
        password=login.get("password") or None,
        ssl=url.tls,
        ssl_check_hostname=url.tls,
        socket_connect_timeout=10,
        socket_timeout=config.block + 10,
        socket_keepalive=True,
    )
    try:
        await _Subscription(config, client, emit).run()
    except redis.exceptions.AuthenticationError as err:  # before its base, ConnectionError
        raise sdk.NonRetryableError(f"Redis refused the login: {err}", kind="auth") from None
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as err:
        raise disconnected("Redis", err) from err
    finally:
        await client.aclose()


connector = broker_connector(
    message_received,
    REDIS_LOGIN,
    label="Redis Streams",
    description="Start runs from entries added to a Redis stream (consumer groups)",
    docs_url="https://redis.io/docs/latest/develop/data-types/streams/",
)
