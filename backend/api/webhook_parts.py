"""How a webhook answer (:class:`backend.services.triggers.webhook_answers.Answer`) is sent:
as a Litestar response by the app's route (:func:`to_response`), as ASGI messages by the
front door (backend/api/webhook_front.py, :func:`to_asgi`)."""

from __future__ import annotations

from functools import partial

from litestar import MediaType, Response
from litestar.response.base import ASGIResponse
from litestar.types import ASGIApp, Receive, Scope, Send

from backend.services.triggers.webhook_answers import Answer

__all__ = ["to_asgi", "to_response"]


def to_response(answer: Answer) -> Response[bytes]:
    """``answer`` as a Litestar response (bytes pass through its serializer untouched)."""
    return Response(
        answer.body,
        status_code=answer.status,
        headers=answer.headers,
        media_type=answer.media_type,
    )


def to_asgi(answer: Answer) -> ASGIApp:
    """``answer`` as the ASGI response Litestar would make of :func:`to_response`, with
    the same messages. An answer with a body and no Content-Type or Content-Length of its
    own (every 202 and most answers) is sent by :func:`_send_plain`, without building
    Litestar's response object (about 20 microseconds less per answer); any other is
    Litestar's ``ASGIResponse``. Either way the headers are encoded here, so a value
    latin-1 cannot carry raises ``UnicodeEncodeError`` from this call, as Litestar's
    response raises it when built."""
    if (
        answer.status < 200
        or answer.status in _NO_BODY
        or _SETS_OWN.intersection(name.lower() for name in answer.headers)
    ):
        return ASGIResponse(
            body=answer.body,
            status_code=answer.status,
            headers=answer.headers,
            media_type=answer.media_type,
        )
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in answer.headers.items()
    ]
    headers.append((b"content-type", _content_type(answer.media_type)))
    headers.append((b"content-length", str(len(answer.body)).encode("latin-1")))
    return partial(_send_plain, answer.status, headers, answer.body)


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
