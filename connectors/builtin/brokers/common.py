"""What the broker triggers share: broker URLs, the SSRF check of the broker host,
payload decoding, event ids and the consumer names derived from the workflow.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ipaddress
import math
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import unquote, urlsplit

import msgspec

from connectors import sdk
from connectors.sdk.triggers import MAX_EVENT_ID

__all__ = [
    "DISCONNECTED",
    "BrokerLoginFields",
    "BrokerUrl",
    "ConcurrencyField",
    "NotValid",
    "PayloadMode",
    "PayloadModeField",
    "broker_connector",
    "content_id",
    "decode_payload",
    "dial_host",
    "disconnected",
    "event_id",
    "handle_each",
    "jsonable",
    "login_type",
    "parse_broker_url",
    "stable_name",
    "url_host",
    "url_meta",
    "url_validator",
]

DISCONNECTED = "broker_disconnected"
"""Error kind raised when a subscription's connection ends (the product reconnects)."""

PayloadMode = Literal["json", "text", "base64"]

PayloadModeField = Annotated[
    PayloadMode,
    msgspec.Meta(
        title="Payload",
        description=(
            "json: the body decoded as JSON (a body that is not JSON goes to the dead "
            "letters); text: the body as UTF-8 text; base64: the raw bytes, base64-encoded"
        ),
        extra_json_schema={
            "x-enum-labels": {"json": "JSON", "text": "Text", "base64": "Bytes (base64)"}
        },
    ),
]


def url_meta(title: str, example: str) -> msgspec.Meta:
    """``msgspec.Meta`` of a config's broker URL field: ``title`` and an ``example`` URL
    (with its TLS variant), saying the login belongs in a credential."""
    return msgspec.Meta(
        title=title, description=f"{example}; the login goes in a credential", min_length=1
    )


class BrokerLoginFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A user name and password the broker checks when the connection opens."""

    username: Annotated[str, msgspec.Meta(title="Username", min_length=1)]
    password: Annotated[str, sdk.secret("Password")]


def login_type(
    name: str, label: str, description: str, fields: type[Any] = BrokerLoginFields
) -> sdk.CredentialType:
    """A broker login credential type (:class:`BrokerLoginFields` unless ``fields`` says
    otherwise), named ``<connector>.login`` so it reaches its connector's trigger only."""
    return sdk.credential_type(
        name, label=label, kind="custom", fields=fields, description=description
    )


def broker_connector(
    trigger: sdk.TriggerDefinition,
    login: sdk.CredentialType,
    *,
    label: str,
    description: str,
    docs_url: str,
) -> sdk.Connector:
    """The connector of one broker: its "message received" ``trigger`` (whose type names
    the connector and whose icon heads the palette group) and its ``login`` type."""
    return sdk.Connector(
        name=trigger.type.split(".", 1)[0],
        label=label,
        version="1.0.0",
        description=description,
        triggers=[trigger],
        credential_types=[login],
        icon=trigger.icon,
        docs_url=docs_url,
    )


ConcurrencyField = Annotated[
    int,
    msgspec.Meta(
        title="Messages stored at once",
        description="1 keeps the broker's order; more stores messages (and starts their "
        "runs) in parallel, each still acked only after its own run is stored",
        ge=1,
        le=100,
    ),
]

T = TypeVar("T")


async def handle_each(
    messages: AsyncIterator[T],
    handle: Callable[[T], Coroutine[Any, Any, None]],
    concurrency: int,
) -> None:
    """Run ``handle`` (emit, then ack) on each of ``messages``: one after the other when
    ``concurrency`` is 1, else up to ``concurrency`` at once.

    Returns when ``messages`` ends and every ``handle`` is done. The first error raised
    by a ``handle`` or by ``messages`` cancels the rest and is raised as it is (not in an
    ``ExceptionGroup``); a message whose ``handle`` was cancelled before its ack is
    delivered again by the broker.
    """
    if concurrency <= 1:
        async for message in messages:
            await handle(message)
        return
    slots = asyncio.Semaphore(concurrency)
    try:
        async with asyncio.TaskGroup() as group:
            async for message in messages:
                await slots.acquire()
                task: asyncio.Task[None] = group.create_task(handle(message))
                task.add_done_callback(lambda _task: slots.release())
    except BaseExceptionGroup as errors:
        raise _first_error(errors) from None


def _first_error(errors: BaseExceptionGroup[BaseException]) -> BaseException:
    first = errors.exceptions[0]
    return _first_error(first) if isinstance(first, BaseExceptionGroup) else first


class NotValid(Exception):
    """A message the trigger cannot turn into an event (goes to the dead letters).

    ``reason`` is the short text the user sees beside the dead letter.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_payload(body: bytes, mode: str) -> Any:
    """The payload of a message body in ``mode`` (see :data:`PayloadMode`).

    Returns the decoded JSON value, the text, or the base64 text. Raises
    :class:`NotValid` (``"not JSON: ..."``, ``"not UTF-8 text"``) when ``body`` does not
    decode, and ``ValueError`` for an unknown mode.
    """
    if mode == "json":
        try:
            return msgspec.json.decode(body)
        except msgspec.DecodeError as err:
            raise NotValid(f"not JSON: {err}") from None
    if mode == "text":
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            raise NotValid("not UTF-8 text") from None
    if mode == "base64":
        return base64.b64encode(body).decode("ascii")
    raise ValueError(f"unknown payload mode {mode!r}")


def jsonable(value: Any) -> Any:
    """``value`` (message headers, properties) as JSON: bytes become UTF-8 text (or
    base64 text when they are not UTF-8), dates ISO 8601 text, decimals numbers,
    non-finite floats and other objects their ``str``; mappings get text keys."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def content_id(*parts: bytes | str) -> str:
    """``"sha256:<64 hex>"`` of ``parts`` (each length-prefixed, so ``("ab", "c")`` and
    ``("a", "bc")`` differ): an event id for a message that carries none of its own."""
    digest = hashlib.sha256()
    for part in parts:
        raw = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
    return "sha256:" + digest.hexdigest()


def event_id(value: str) -> str:
    """``value`` as an event id: kept when it has 1 to 200 characters, else its
    :func:`content_id` (an over-long id from a publisher is still one stable key).
    Raises ``ValueError`` for an empty value."""
    if not value:
        raise ValueError("an event id cannot be empty")
    return value if len(value) <= MAX_EVENT_ID else content_id(value)


def stable_name(prefix: str) -> str:
    """A consumer name (or MQTT client id) stable for this workflow's trigger step:
    ``"<prefix>-<14 hex>"`` from the workflow id and step id of the running context.

    The same workflow's trigger gets the same name after a crash or a new version, so
    the broker hands it what the previous subscription left unacked. 14 hex digits keep
    an MQTT client id at 23 characters with the ``"railyard"`` prefix (the length every
    MQTT 3.1.1 server accepts).
    """
    info = sdk.info()
    digest = hashlib.sha256(f"{info.workflow_id}\x00{info.step_id}".encode()).hexdigest()
    return f"{prefix}-{digest[:14]}"


@dataclass(frozen=True)
class BrokerUrl:
    """A parsed broker URL.

    Attributes:
        scheme: as written (``"amqps"``, ``"redis"``, ...); ``tls`` says whether it
            means TLS.
        host: host name or IP address (IPv6 without brackets).
        port: TCP port (the scheme's default when the URL names none).
        path: the path without its leading ``/``, percent-decoded (a vhost, a database).
        username: the user named in the URL (``""`` when none).
    """

    scheme: str
    host: str
    port: int
    path: str
    username: str
    tls: bool


_URL = {"field": "url"}


def parse_broker_url(url: str, schemes: Mapping[str, tuple[int, bool]]) -> BrokerUrl:
    """Parse ``url``; ``schemes`` maps each accepted scheme to ``(default port, tls)``.

    Raises :class:`connectors.sdk.ConfigError` (``details={"field": "url"}``) for another
    scheme, a URL without host, a bad port, or a password in the URL (secrets belong in a
    credential, never in node config, which is shown and exported).
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as err:
        raise sdk.ConfigError(f"invalid broker URL {url!r}: {err}", details=_URL) from None
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        accepted = ", ".join(f"{s}://" for s in schemes)
        raise sdk.ConfigError(f"broker URL must start with {accepted}: {url!r}", details=_URL)
    if not parts.hostname:
        raise sdk.ConfigError(f"broker URL has no host: {url!r}", details=_URL)
    if parts.password:
        raise sdk.ConfigError(
            "the broker URL holds a password: put it in a credential, not in the node's config",
            details=_URL,
        )
    default_port, tls = schemes[scheme]
    return BrokerUrl(
        scheme=scheme,
        host=parts.hostname,
        port=port or default_port,
        path=unquote(parts.path[1:]) if parts.path.startswith("/") else unquote(parts.path),
        username=unquote(parts.username or ""),
        tls=tls,
    )


def url_validator(schemes: Mapping[str, tuple[int, bool]]) -> Callable[[Any], None]:
    """The ``validate`` hook of a broker trigger whose config has a ``url`` field: runs
    :func:`parse_broker_url` on it with ``schemes``, so a URL that can never connect is a
    compile error (raises :class:`connectors.sdk.ConfigError`)."""

    def validate(config: Any) -> None:
        parse_broker_url(config.url, schemes)

    return validate


async def dial_host(url: BrokerUrl) -> str:
    """Check the broker's host against the deployment's SSRF policy; return the host to
    connect to.

    Without TLS that is the first checked address itself, so a DNS answer that changes
    after the check (DNS rebinding) cannot send the connection elsewhere; with TLS it is
    the name, which the certificate is verified against. Raises
    :class:`connectors.sdk.NonRetryableError` (kind ``ssrf_blocked``) for a refused
    address and :class:`connectors.sdk.ActionError` (kind ``dns_error``) when the name does
    not resolve.
    """
    addresses = await sdk.current_context().ssrf.resolve_and_check(url.host, url.port)
    if url.tls or not addresses:
        return url.host
    return str(addresses[0])


def url_host(host: str) -> str:
    """``host`` as it appears in a URL (an IPv6 address in brackets)."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def disconnected(broker: str, cause: BaseException | str) -> sdk.ActionError:
    """The error ``listen`` raises when its connection to ``broker`` ends (retryable,
    kind :data:`DISCONNECTED`); the product reconnects with backoff."""
    return sdk.ActionError(f"the connection to {broker} ended: {cause}", kind=DISCONNECTED)
