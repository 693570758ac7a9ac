"""The front door of webhook deliveries: ``/hooks/{token}[/{suffix}]`` answered without the
app's routing, guard and middleware layers, by the same code as the app's route.

A webhook delivery is the one request Railyard serves at volume from outside, and the app's
general machinery around it (routing, the permission guard, four middleware layers, request
and response objects with their ``send`` wrappers) cost about as much CPU as starting the
run itself (docs/performance.md, "Sixth round"). :class:`WebhookFront` sits in front of that
machinery, inside the Litestar application (it replaces the app's ``asgi_handler``, so the
app's ``before_send`` hook still sets the security headers on every answer), and serves a
delivery itself when it is an ordinary one:

- a method the route accepts, on ``/hooks/<token>`` or ``/hooks/<token>/<suffix>`` (not
  the designer's ``/hooks/test/...``), with no empty segment and no trailing slash;
- a token whose endpoint is known and deliverable (published, a webhook, not archived):
  the 404 and 410 answers stay the app's (an endpoint that cannot be looked up, e.g. while
  PostgreSQL is unreachable, is answered as the route answers it: 503);
- a path, query string and body (read whole, up to the input check's scan size) in which
  no character PostgreSQL cannot store could hide: the app's input check answers those.

Anything else goes to the app unchanged, with the body already read handed back first
(:func:`backend.api.storable_input.replay`). A delivery the front serves gets what the
middleware gives every request: a request id (``X-Request-ID``, bound for the audit log and
the logs: :func:`backend.web.authentication.with_request_context`), the latency histogram and the
trace span by route template (:func:`backend.api.telemetry.observed`), and an error the
delivery raises answered by the app's own exception handlers (503 while PostgreSQL or Redis
is unreachable, 500 without a stack trace for a bug). The answer itself comes from
:func:`backend.api.webhooks.deliver`, which the app's route calls too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from litestar import Litestar, Request
from litestar.exceptions import HTTPException
from litestar.types import ASGIApp, ExceptionHandlersMap, Receive, Scope, Send

from backend import problems
from backend.api import webhooks
from backend.api.storable_input import might_hold_unstorable, read_head, replay
from backend.api.telemetry import observed
from backend.api.webhook_parts import to_asgi
from backend.services.runs.storable import find_unstorable
from backend.services.triggers.webhook_answers import Answer, Rejection
from backend.web.authentication import with_request_context

PREFIX = "/hooks/"
METHODS = frozenset(method.value for method in webhooks.METHODS)
ROUTE = "/hooks/{token}"
ROUTE_SUFFIX = "/hooks/{token}/{suffix}"

log = logging.getLogger(__name__)


def delivery_target(scope: Scope) -> tuple[str, str] | None:
    """``(token, suffix)`` when ``scope`` is a request the front may serve by its method
    and path, else ``None``. ``suffix`` is as the app's route gets it: ``""`` without
    one, else with its leading ``/`` (``"/orders/new"``)."""
    if scope["type"] != "http" or scope.get("method") not in METHODS:
        return None
    path = str(scope.get("path", ""))
    if not path.startswith(PREFIX) or path.endswith("/") or "//" in path:
        return None
    token, slash, suffix = path[len(PREFIX) :].partition("/")
    if not token or token in ("test", "app"):
        return None
    # U+0000 and lone surrogates are the unstorable characters; an ASCII path holds no
    # surrogate, so only a path with other characters is looked at in full
    if "\x00" in path or (not path.isascii() and find_unstorable(path, "path") is not None):
        return None
    return token, slash + suffix


def exception_handler(handlers: ExceptionHandlersMap, exc: Exception) -> Any:
    """The handler of ``handlers`` (an app's ``exception_handlers``) that answers ``exc``,
    chosen as Litestar documents it chooses ("Exception handling": a status code's
    handler before an exception type's): an ``HTTPException``'s status code, else the
    first class of the exception's MRO with a handler, else the ``500`` handler for
    anything not an ``HTTPException``; ``None`` when none applies. Kept here rather than
    imported from Litestar's private middleware module, whose name may change in any
    release."""
    if isinstance(exc, HTTPException):
        found = handlers.get(exc.status_code)
        if found is not None:
            return found
        default = None
    else:
        default = handlers.get(500)
    for cls in type(exc).__mro__:
        if cls in handlers:
            return handlers[cls]
    return default


class WebhookFront:
    """The ASGI entry described in the module doc, in front of ``app``'s own handler
    ``inner``. ``max_scan_bytes``: the most of a body read before deciding (the input
    check's, backend/api/storable_input.py); a longer body goes to the app."""

    def __init__(self, app: Litestar, inner: ASGIApp, max_scan_bytes: int) -> None:
        self.app = app
        self.inner = inner
        self.max_scan_bytes = max_scan_bytes

    @classmethod
    def install(cls, app: Litestar, max_scan_bytes: int) -> None:
        """Put the front in front of ``app``'s routing (in the app's ``asgi_handler``)."""
        app.asgi_handler = cls(app, app.asgi_handler, max_scan_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()  # as the app's telemetry: lookup and upload included
        target = delivery_target(scope)
        runtime = getattr(self.app.state, "runtime", None)
        if target is None or runtime is None or might_hold_unstorable(scope["query_string"]):
            await self.inner(scope, receive, send)
            return
        token, suffix = target
        route = ROUTE_SUFFIX if suffix else ROUTE
        request: Request[Any, Any, Any] = Request(scope, receive)
        try:
            endpoint = await webhooks.cached_endpoint(runtime, token)
        except Exception as exc:  # e.g. PostgreSQL unreachable: answered as the route would
            error = exc

            async def failed() -> ASGIApp:  # in the request's context: its log has the id
                return self._error_answer(request, error)

            await self._serve(scope, receive, send, route, started, failed)
            return
        if endpoint is None or not webhooks.deliverable(endpoint):
            await self.inner(scope, receive, send)
            return
        head, more = await read_head(scope, receive, self.max_scan_bytes)
        if more or might_hold_unstorable(head):
            await self.inner(scope, replay(head, more, receive), send)
            return

        async def read(limit: int) -> bytes:
            if len(head) > limit:
                raise Rejection(413, f"body larger than {limit} bytes")
            return head

        async def answer() -> ASGIApp:
            try:
                return to_asgi(await webhooks.deliver(endpoint, suffix, request, read))
            except Exception as exc:
                return self._error_answer(request, exc)

        await self._serve(scope, receive, send, route, started, answer)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        route: str,
        started: float,
        answer: Callable[[], Awaitable[ASGIApp]],
    ) -> None:
        """Send what ``answer()`` makes, with the request's context and telemetry."""

        async def serve(sent: Send) -> None:
            await (await answer())(scope, receive, sent)

        await observed(
            scope, send, route, lambda sent: with_request_context(scope, sent, serve), started
        )

    def _error_answer(self, request: Request[Any, Any, Any], exc: Exception) -> ASGIApp:
        """The app's answer to ``exc`` (its exception handlers, by status then type); a
        plain 500 when none answers it (logged with its traceback, never sent)."""
        try:
            handler = exception_handler(self.app.exception_handlers, exc)
            if handler is not None:
                return handler(request, exc).to_asgi_response(app=None, request=request)
        except Exception:
            log.exception("the error handler of %s failed", type(exc).__name__)
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        body = problems.body(500, "internal error (logged)", request.url.path)
        return to_asgi(Answer(500, body, media_type=problems.MEDIA_TYPE))
