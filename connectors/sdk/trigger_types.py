"""The values trigger code hands to the product and gets from it: events with their dedupe
id, a poll's result, an app webhook's request, answer and registration, the refusal of a
delivery, and the ``emit`` of a subscription (:mod:`connectors.sdk.triggers`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec

__all__ = [
    "MAX_EVENT_ID",
    "CheckFn",
    "DeliveryRefused",
    "Emit",
    "ListenFn",
    "PollFn",
    "PollResult",
    "PushRequest",
    "PushResponse",
    "ReceiveFn",
    "RegisterFn",
    "Registration",
    "TriggerEvent",
    "UnregisterFn",
    "ValidateFn",
]

MAX_EVENT_ID = 200
"""Longest event id (dedupe key) in characters."""


class TriggerEvent(msgspec.Struct, frozen=True):
    """One event a trigger heard.

    Attributes:
        id: the dedupe key, 1 to :data:`MAX_EVENT_ID` characters: the vendor's delivery
            or event id, the polled item's id, the broker message id, the email
            Message-ID. One run per ``(workflow, id)``.
        data: the run input (JSON-able); the trigger step's output.
        meta: what the run page shows about where the event came from, e.g.
            ``{"delivery_id": "Ev123", "message_id": "<a@b>"}`` (strings only).
    """

    id: str
    data: Any = None
    meta: dict[str, str] = msgspec.field(default_factory=dict)


class PollResult(msgspec.Struct):
    """What one ``poll`` returns: the new events (oldest first) and the cursor to store.

    ``cursor`` is any JSON-able value; it is stored in the transaction that stores the
    events, and the next ``poll`` gets it back. ``None`` keeps the stored cursor.
    """

    events: list[TriggerEvent] = msgspec.field(default_factory=list)
    cursor: Any = None


class PushRequest(msgspec.Struct, frozen=True):
    """A delivery to an app webhook's URL, as ``receive`` sees it.

    Attributes:
        method: ``"POST"``, ``"GET"``, ...
        headers: header names lower-cased; repeated headers joined with ``", "``.
        query: query parameters (the last value of a repeated name).
        body: the raw body (bytes; verify signatures over this, never a re-encoding).
        received_at: when the product received it, in Unix seconds.
        url: the trigger's public URL.
    """

    method: str
    headers: dict[str, str]
    body: bytes = b""
    query: dict[str, str] = msgspec.field(default_factory=dict)
    received_at: float = 0.0
    url: str = ""

    def json(self) -> Any:
        """The body decoded as JSON; raises :class:`DeliveryRefused` (400) when it is not."""
        try:
            return msgspec.json.decode(self.body)
        except msgspec.DecodeError:
            raise DeliveryRefused(400, "payload", "the body is not valid JSON") from None


class PushResponse(msgspec.Struct):
    """What ``receive`` answers: the events to start runs for and the HTTP answer.

    ``body`` is sent as JSON (``str`` as ``text/plain``, e.g. a challenge echo); the
    answer goes out after the events' runs are stored.
    """

    events: list[TriggerEvent] = msgspec.field(default_factory=list)
    status: int = 200
    body: Any = None


class Registration(msgspec.Struct):
    """The state of a hook registered at the vendor, stored encrypted per workflow.

    Attributes:
        remote_id: the vendor's id of the hook (to check and delete it).
        secret: a signing secret the vendor issued (or the product generated).
        data: anything else the connector needs later (JSON-able).
    """

    remote_id: str = ""
    secret: str = ""
    data: dict[str, Any] = msgspec.field(default_factory=dict)


class DeliveryRefused(Exception):
    """Raised by ``receive`` for a delivery that must start no run.

    Attributes:
        status: HTTP status of the answer (400 malformed, 401 unsigned or mis-signed,
            403 forbidden, 409 replayed, 413 too large).
        reason: short machine label counted in metrics: ``"signature"``, ``"replay"``,
            ``"payload"``, ``"size"``, ...
        message: what the sender is told.
    """

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


class Emit(Protocol):
    """What ``listen`` hands its messages to (the product's side of a subscription)."""

    async def __call__(self, event: TriggerEvent) -> None:
        """Store ``event`` and its run; returns once both are durable (ack after it).
        Calls may overlap: a listener that keeps several messages in flight (each acked
        after its own call returns) has their events stored together, a few statements
        for a group instead of one round trip per message."""

    async def dead_letter(self, reason: str, raw: bytes | str, meta: dict[str, str]) -> None:
        """Keep a message that is not valid for the trigger (undecodable, no id, ...)
        where the user sees it (the workflow's dead letters), then ack it: returns once
        it is stored."""


PollFn = Callable[[Any, Any], Awaitable[PollResult]]
ReceiveFn = Callable[[Any, PushRequest, Registration | None], Awaitable[PushResponse]]
ListenFn = Callable[[Any, Emit], Awaitable[None]]
RegisterFn = Callable[[Any, str], Awaitable[Registration]]
CheckFn = Callable[[Any, Registration], Awaitable[bool]]
UnregisterFn = Callable[[Any, Registration], Awaitable[None]]
ValidateFn = Callable[[Any], object]
"""``validate(config)``: checks a parsed config needs no connection for (URL scheme, a
password in a URL, a name's syntax); raises :class:`~connectors.sdk.ConfigError` (with
``details={"field": name}`` for the field at fault); what it returns is ignored."""
