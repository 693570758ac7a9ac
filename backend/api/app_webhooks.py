"""``/hooks/app/{token}``: deliveries of connector app webhooks (Slack's Events API, ...).

The token is the trigger's (one per workflow, kept across versions; shown on the workflow
page). The answer is the connector's (a handshake's challenge, 200 with no body) once the
delivery's events are stored; refusals are problem details: 401 unsigned, mis-signed or
replayed, 400 malformed, 404 unknown, 410 no longer active, 413 too large
(:mod:`backend.services.triggers.events.push`).
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, route
from litestar.enums import HttpMethod
from litestar.params import FromPath

from backend.auth.policy import Permission
from backend.runtime import Runtime
from backend.services.triggers.events import push

METHODS: list[HttpMethod] = [HttpMethod.GET, HttpMethod.POST, HttpMethod.PUT, HttpMethod.PATCH]


async def _body(request: Request[Any, Any, Any], limit: int) -> bytes:
    """The body, read up to one byte past ``limit`` (enough to refuse it as too large)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return b"\0" * (limit + 1)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(chunks)


class AppWebhookController(Controller):
    """The URLs vendors deliver connector trigger events to."""

    path = "/hooks/app"
    tags = ["webhooks"]

    @route(
        "/{token:str}",
        http_method=METHODS,
        operation_id=lambda _h, method, _p: f"receive_app_webhook_{method.lower()}",
        request_max_body_size=None,
        opt={"permission": Permission.PUBLIC},
    )
    async def receive(
        self, token: FromPath[str], request: Request[Any, Any, Any]
    ) -> Response[bytes]:
        """Verify a vendor's delivery with the trigger's code, store its events once and
        start their runs (see the module doc)."""
        runtime: Runtime = request.app.state.runtime
        limit = runtime.settings.webhook_max_body
        answer = await push.deliver(
            runtime.events,
            token,
            method=request.method,
            headers=dict(request.headers),
            query={k: v for k, v in request.query_params.items()},
            body=await _body(request, limit),
            max_body=limit,
        )
        headers = dict(answer.headers)
        if answer.run_ids:
            headers["X-Railyard-Run-Ids"] = ",".join(answer.run_ids)
        return Response(
            answer.body, status_code=answer.status, media_type=answer.media_type, headers=headers
        )
