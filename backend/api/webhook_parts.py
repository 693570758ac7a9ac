"""The pieces of a webhook delivery that the route, the front door
(backend/api/webhook_front.py) and CloudEvents (backend/api/webhook_cloudevents.py)
share: a rejection, the answer, the verified body and the idempotency key a run is
started with."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from litestar import MediaType, Response
from litestar.response.base import ASGIResponse
from litestar.types import ASGIApp, Receive, Scope, Send

from backend import problems
from backend.engine.nodes.trigger_webhook import DEFAULT_IDEMPOTENCY_HOURS
from backend.runtime import Runtime
from backend.services import webhooks as hooks
from backend.triggers.body_schema import BodyRefused
from backend.triggers.webhook_auth import AuthFailure, verify

__all__ = [
    "Answer",
    "BodyReader",
    "Rejection",
    "body_rejection",
    "error_answer",
    "held_key",
    "verified_body",
]


@dataclass
class Rejection(Exception):
    """A request refused before any run exists; ``field`` names where in the request
    (``body``) when one place is at fault."""

    status: int
    reason: str
    headers: dict[str, str] | None = None
    audit: bool = True
    field: str | None = None
    errors: list[dict[str, str]] | None = None


BodyReader = Callable[[int], Awaitable[bytes]]
"""Reads a request's whole body, at most the given number of bytes (a longer one raises
:class:`Rejection` 413)."""


@dataclass
class Answer:
    """A webhook's HTTP answer, whichever way the request came in: through the app's
    route (:meth:`response`) or through the front (backend/api/webhook_front.py,
    :meth:`asgi`). ``body`` is encoded; ``media_type`` is Litestar's (``text/...`` gets
    ``; charset=utf-8`` either way)."""

    status: int
    body: bytes
    media_type: str = MediaType.JSON
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> Response[bytes]:
        """As a Litestar response (bytes pass through its serializer untouched)."""
        return Response(
            self.body, status_code=self.status, headers=self.headers, media_type=self.media_type
        )

    def asgi(self) -> ASGIApp:
        """As the ASGI response Litestar would make of :meth:`response`, with the same
        messages. An answer with a body and no Content-Type or Content-Length of its own
        (every 202 and most answers) is sent by :func:`_send_plain`, without building
        Litestar's response object (about 20 microseconds less per answer); any other is
        Litestar's ``ASGIResponse``. Either way the headers are encoded here, so a value
        latin-1 cannot carry raises ``UnicodeEncodeError`` from this call, as Litestar's
        response raises it when built."""
        if (
            self.status < 200
            or self.status in _NO_BODY
            or _SETS_OWN.intersection(name.lower() for name in self.headers)
        ):
            return ASGIResponse(
                body=self.body,
                status_code=self.status,
                headers=self.headers,
                media_type=self.media_type,
            )
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in self.headers.items()
        ]
        headers.append((b"content-type", _content_type(self.media_type)))
        headers.append((b"content-length", str(len(self.body)).encode("latin-1")))
        return partial(_send_plain, self.status, headers, self.body)


async def _send_plain(
    status: int,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """Send an answer as Litestar's ``ASGIResponse`` sends it: the start with ``headers``
    (encoded, Litestar's order: the answer's own, then Content-Type and Content-Length),
    then the whole body in one message."""
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


_NO_BODY = frozenset({204, 304})
"""Statuses without a body (Litestar's ``ASGIResponse`` sends neither length nor type)."""

_SETS_OWN = frozenset({"content-type", "content-length"})
"""Headers Litestar sets only when the answer does not (``setdefault``)."""


def _content_type(media_type: str) -> bytes:
    """The Content-Type Litestar sends for ``media_type`` (an empty one is JSON, ``text/*``
    gets UTF-8)."""
    text = media_type.value if isinstance(media_type, MediaType) else media_type
    text = text or MediaType.JSON.value
    if text.startswith("text/"):
        text = f"{text}; charset=utf-8"
    return text.encode("latin-1")


def body_rejection(refused: BodyRefused, *, where: str = "", in_request: str = "") -> Rejection:
    """The 422 of a body breaking the trigger's body schema (mode ``reject``): the first
    problem's field in ``field``, every problem in ``errors``. ``where`` prefixes the
    reason (a batch's ``event 1 of the batch: ``); ``in_request`` is where the checked body
    sits in the request body, as a dotted path (a batch's ``1``; ``""``: the whole body),
    for the errors' JSON Pointers."""
    errors = [
        {**p, "pointer": problems.pointer(".".join(filter(None, (in_request, _at(p["field"])))))}
        for p in refused.problems
    ]
    return Rejection(422, f"{where}{refused}", field=refused.problems[0]["field"], errors=errors)


def _at(field: str) -> str:
    """A run input path as a path in what was checked (``body.qty``, ``data.qty`` ->
    ``qty``; the root itself -> ``""``)."""
    return field.partition(".")[2]


def error_answer(rej: Rejection, instance: str) -> Answer:
    """The answer to a rejection of the request to ``instance`` (its path): problem
    details (:mod:`backend.problems`) naming the field when known, and each of
    ``rej.errors`` (``{"field", "message", "pointer"}``) as a finding pointing into the
    body."""
    errors = None
    if rej.errors:  # each {"field": "body.x", "message", "pointer"} (body_rejection)
        errors = [problems.ProblemError(e["message"], pointer=e.get("pointer")) for e in rej.errors]
    body = problems.body(rej.status, rej.reason, instance, field=rej.field, errors=errors)
    return Answer(rej.status, body, media_type=problems.MEDIA_TYPE, headers=rej.headers or {})


async def verified_body(
    runtime: Runtime, endpoint: hooks.Endpoint, headers: dict[str, str], read: BodyReader
) -> bytes:
    """The request body, at most the trigger's ``max_body`` (else the server's limit)
    bytes, after the trigger's authentication accepted it. Raises :class:`Rejection`
    413 (too large, from ``read``) or 401 (authentication failed)."""
    config = endpoint.config
    max_body = config.get("max_body")
    limit = int(max_body) if isinstance(max_body, int) else runtime.settings.webhook_max_body
    raw = await read(limit)
    try:
        verify(config, endpoint.secret, headers, raw, time.time())
    except AuthFailure as exc:
        raise Rejection(401, str(exc)) from exc
    return raw


async def held_key(runtime: Runtime, endpoint: hooks.Endpoint, value: str) -> str:
    """The idempotency key of a delivery identified by ``value`` (an Idempotency-Key, a
    delivery id, a CloudEvent's source and id): ``webhook:<workflow id>:<value>`` (at
    most 150 characters of it). A run that holds it longer than the trigger's
    ``idempotency_hours`` (default 24) lets it go first, so the delivery starts anew."""
    key = f"webhook:{endpoint.workflow_id}:{value[:150]}"
    hours = endpoint.config.get("idempotency_hours")
    window = float(hours) if isinstance(hours, int | float) else DEFAULT_IDEMPOTENCY_HOURS
    async with runtime.sessionmaker() as session, session.begin():
        cutoff = hooks.idempotency_cutoff(runtime.execution.clock.now(), window)
        await hooks.release_expired_key(session, key, cutoff)
    return key
