"""Per-request telemetry of the API: the latency histogram (and webhook answers) of
:mod:`backend.observability.metrics`, and the SERVER span of
:mod:`backend.observability.tracing` when tracing is on."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.middleware._internal.exceptions.middleware import ExceptionHandlerMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from backend.observability import metrics, tracing


class TelemetryMiddleware(ASGIMiddleware):
    """Time each HTTP request by its route template (``/api/runs/{run_id}``; paths no
    route matches count as ``unmatched``) and status, and trace it when tracing is on.

    The status is the one the client got: an exception raised by a middleware inside
    this one (e.g. the input check's 400, backend/api/storable_input.py) is turned into
    its answer here, by Litestar's own exception handling with the app's handlers,
    instead of escaping to the app's outer handler after the status was recorded.
    ``ExceptionHandlerMiddleware`` left Litestar's public API in 2.9 with no replacement:
    Litestar is pinned and this seam tested (tests/unit/test_private_seams.py).
    """

    scopes = (ScopeType.HTTP,)

    def __init__(self) -> None:
        # the exception handling wrapped around each route's app, made once per route
        self._handled: dict[ASGIApp, ASGIApp] = {}

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        """Serve the request, recording its status and duration."""
        started = time.perf_counter()
        handled = self._handled.get(next_app)
        if handled is None:
            handled = self._handled[next_app] = ExceptionHandlerMiddleware(next_app, debug=None)
        route = str(scope.get("path_template") or "unmatched")
        await observed(scope, send, route, lambda sent: handled(scope, receive, sent), started)


async def observed(
    scope: Scope,
    send: Send,
    route: str,
    serve: Callable[[Send], Awaitable[None]],
    started: float | None = None,
) -> None:
    """Run ``serve(send)`` as the HTTP request of ``scope`` matched to ``route`` (a route
    template), recording its status and duration (from ``started``, a
    :func:`time.perf_counter` reading, else now) and tracing it when tracing is on. The
    status is 500 unless ``serve`` sent a response start."""
    if started is None:
        started = time.perf_counter()
    status = 500
    method = str(scope.get("method", "GET"))

    async def send_status(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        await send(message)

    try:
        if tracing.enabled():
            headers = {
                k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])
            }
            with tracing.server_span(method, route, headers) as current:
                await serve(send_status)
                if current is not None:
                    current.set_attribute("http.response.status_code", status)
        else:
            await serve(send_status)
    finally:
        metrics.http_request(method, route, status, time.perf_counter() - started)
