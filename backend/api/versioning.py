"""The API's version in its paths: every operation lives under ``/api/v1``; the paths of
before (``/api/...`` without a version) answer as aliases until :data:`SUNSET`
(docs/api.md, "Versions"; CHANGELOG.md).

:class:`UnversionedAlias` sits in front of the app's routing (it replaces the app's
``asgi_handler``, as :class:`backend.api.webhook_front.WebhookFront` does): a request to
``/api/<rest>`` whose ``<rest>`` does not start with a version is routed as
``/api/v1/<rest>``, and its answer says so with ``Deprecation`` (RFC 9745, the date the
alias was deprecated), ``Sunset`` (RFC 8594, the date it stops answering) and a ``Link``
to the versioned path with the request's query (``rel="successor-version"``, RFC 5829).
Only the router sees the versioned path: the alias answers what the versioned operation
answers, in the shape the unversioned path answered before (lists as bare arrays, without
the ``rel="next"`` link of the envelope's pages: :mod:`backend.api.legacy_shapes`), and an
error's ``instance`` names the path that was requested (:func:`requested_path`).

The OAuth2 redirect URI (:data:`PERMANENT`) stays unversioned for good: providers hold it
in their client registrations, so it is no part of the versioned API and never sunsets.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime
from typing import cast

from litestar import Litestar
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from backend.api import legacy_shapes

PREFIX = "/api/v1"
"""Where every operation of the current API version lives."""

DEPRECATED = datetime(2026, 12, 5, tzinfo=UTC)
"""When the unversioned paths were deprecated (the day ``/api/v1`` appeared)."""

SUNSET = datetime(2027, 6, 30, tzinfo=UTC)
"""When the unversioned paths stop answering (CHANGELOG.md)."""

PERMANENT = frozenset({"/api/credentials/oauth2/callback"})
"""Unversioned paths that are no alias: they answer without deprecation headers."""

REQUESTED_PATH = "railyard.requested_path"
"""Key of the ASGI scope holding the path a routed alias was requested as."""

_HEADERS = (
    (b"deprecation", f"@{int(DEPRECATED.timestamp())}".encode()),
    (b"sunset", format_datetime(SUNSET, usegmt=True).encode()),
)


def versioned(path: str) -> str | None:
    """The ``/api/v1`` path an unversioned API path is an alias of (``None`` when ``path``
    is versioned already or no API path)."""
    if not path.startswith("/api/") or path.startswith(PREFIX + "/") or path == PREFIX:
        return None
    rest = path[len("/api") :]
    if rest.startswith("/v") and rest[2:3].isdigit():  # another version: not an alias
        return None
    return PREFIX + rest


def requested_path(scope: Scope) -> str:
    """The path the client requested: the unversioned one for an alias (the scope's
    ``path`` is the versioned path it is routed as), else the scope's ``path``."""
    return str(scope.get(REQUESTED_PATH) or scope["path"])


class UnversionedAlias:
    """The ASGI entry described in the module doc, in front of ``inner`` (the app's
    handler)."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    @classmethod
    def install(cls, app: Litestar) -> None:
        """Put the alias in front of ``app``'s routing (its ``asgi_handler``)."""
        app.asgi_handler = cls(app.asgi_handler)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        path = scope["path"]
        target = versioned(path)
        if target is None:
            await self.inner(scope, receive, send)
            return
        scope[REQUESTED_PATH] = path  # type: ignore[literal-required]
        scope["path"] = target  # type: ignore[typeddict-unknown-key]
        raw = scope.get("raw_path")
        if isinstance(raw, bytes) and raw.startswith(b"/api/"):  # percent-encoding kept
            scope["raw_path"] = PREFIX.encode() + raw[len(b"/api") :]  # type: ignore[typeddict-unknown-key]
        query = scope.get("query_string", b"")
        scope["query_string"] = legacy_shapes.legacy_query(target, query)
        if path in PERMANENT:
            await self.inner(scope, receive, send)
            return
        successor = f"{target}?{query.decode('latin-1')}" if query else target
        link = (b"link", f'<{successor}>; rel="successor-version"'.encode("latin-1", "replace"))
        held: list[Message] = []

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS, link]
                operation = getattr(scope.get("route_handler"), "operation_id", None)
                if 200 <= message["status"] < 300 and legacy_shapes.reshapes(operation):
                    held.append(message)  # the old shape's length differs: hold the start
                    return
            if held and message["type"] == "http.response.body":
                held.append(message)
                if not message.get("more_body", False):
                    await _send_reshaped(scope, held, send)
                return
            await send(message)

        await self.inner(scope, receive, marked)


async def _send_reshaped(scope: Scope, held: list[Message], send: Send) -> None:
    """Send the held answer (start, body messages) in its old shape
    (:func:`backend.api.legacy_shapes.reshape`)."""
    operation = str(getattr(scope.get("route_handler"), "operation_id", ""))
    raw = b"".join(cast(bytes, m.get("body", b"")) for m in held[1:])
    body = legacy_shapes.reshape(operation, raw)
    start = dict(held[0])
    headers = [  # the old shape has no pages: a next page's link would answer the envelope
        (k, v)
        for k, v in cast(list[tuple[bytes, bytes]], start.get("headers", []))
        if k.lower() != b"content-length" and not (k.lower() == b"link" and b'rel="next"' in v)
    ]
    start["headers"] = [*headers, (b"content-length", str(len(body)).encode())]
    await send(start)  # type: ignore[arg-type]  # the held start message, its length corrected
    await send({"type": "http.response.body", "body": body, "more_body": False})
