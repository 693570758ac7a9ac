"""Refuse every request carrying text PostgreSQL cannot store, before any handler runs.

One middleware in front of every route (API, webhooks, pages): it looks at the request
path, every query parameter and the body, decoded the way Railyard decodes them (the
webhook body parser of :mod:`backend.triggers.webhook_input`, which also covers JSON,
URL-encoded and multipart forms and text for the other routes), and raises
:class:`~backend.services.runs.storable.UnstorableInput` naming the first place holding
U+0000 or a lone surrogate (``path``, ``query.<name>``, ``body.<json path>``,
``files[<n>].filename``). The application answers it 400 with that ``field``.

Cost: the body is parsed again only when its raw bytes could hold such a character (a NUL
byte, a ``\\u0000`` or ``\\uD800``-``\\uDFFF`` JSON escape, or a ``%00`` / ``%ED%A0``-style
percent escape), so ordinary requests pay one regular-expression scan. Bodies longer
than ``max_scan_bytes`` are passed on unscanned (their route's size limit answers first;
a character the database then refuses is still a 400, see
:data:`backend.api.errors.API_EXCEPTION_HANDLERS`).
"""

from __future__ import annotations

import re
from typing import Any

from litestar.connection import Request
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send

from backend.services.runs.storable import check_storable, find_unstorable
from backend.triggers.webhook_input import BodyError, parse_request_body

_SUSPECT = re.compile(
    rb"\x00|\\u0000|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|%00|%[eE][dD]%[89abAB][0-9a-fA-F]"
)

DEFAULT_MAX_SCAN_BYTES = 10 * 1024 * 1024
"""Largest body, in bytes, the middleware reads and scans (Litestar's default body limit)."""


def might_hold_unstorable(raw: bytes) -> bool:
    """True when ``raw`` (a body or query string) could decode to an unstorable character."""
    return _SUSPECT.search(raw) is not None


class StorableInputMiddleware(ASGIMiddleware):
    """See the module docstring. ``max_scan_bytes``: bodies up to this size are scanned."""

    scopes = (ScopeType.HTTP,)

    @staticmethod
    def should_bypass_for_scope(scope: Scope) -> bool:
        """Static assets are served as they are: nothing of theirs is stored."""
        return str(scope.get("path", "")).startswith("/static/")

    def __init__(self, max_scan_bytes: int = DEFAULT_MAX_SCAN_BYTES) -> None:
        self.max_scan_bytes = max_scan_bytes

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        check_storable(scope.get("path", ""), "path")
        if might_hold_unstorable(scope.get("query_string", b"")):
            request: Request[Any, Any, Any] = Request(scope)
            for name, value in request.query_params.multi_items():
                check_storable({name: value}, "query")
        if scope.get("method", "GET") in ("GET", "HEAD", "OPTIONS"):
            await next_app(scope, receive, send)
            return
        head, more = await read_head(scope, receive, self.max_scan_bytes)
        if not more:
            self._check_body(scope, head)
        await next_app(scope, replay(head, more, receive), send)

    @staticmethod
    def _check_body(scope: Scope, raw: bytes) -> None:
        if not might_hold_unstorable(raw):
            return
        content_type = dict(scope.get("headers", ())).get(b"content-type", b"").decode("latin-1")
        try:
            parsed = parse_request_body(content_type, raw)
        except (BodyError, RecursionError):  # malformed or too deep: the route's parser answers
            return
        check_storable(parsed.body, "body")
        for n, upload in enumerate(parsed.files):
            check_storable(
                {"field": upload.field, "filename": upload.filename, "type": upload.content_type},
                f"files[{n}]",
            )


async def read_head(scope: Scope, receive: Receive, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` of the request body (a little more when the last chunk passes
    it); ``more`` is True when the body is longer (nothing is read when the declared
    ``Content-Length`` is) or the client disconnected, i.e. it was not read to its end.
    Hand what was read on with :func:`replay`."""
    declared = dict(scope.get("headers", ())).get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        return b"", True
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), True
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False
        if size > max_bytes:
            return b"".join(chunks), True


def replay(head: bytes, more: bool, receive: Receive) -> Receive:
    """A ``receive`` that first hands over the body part already read, then the rest."""
    pending = True

    async def replay() -> ReceiveMessage:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": head, "more_body": more}
        return await receive()

    return replay


__all__ = [
    "StorableInputMiddleware",
    "find_unstorable",
    "might_hold_unstorable",
    "read_head",
    "replay",
]
