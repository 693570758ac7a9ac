"""``/hooks/{token}[/{suffix}]``: start runs from HTTP requests (the token is the secret).

The controller looks the endpoint up (unknown token or never published -> 404; archived
workflow -> 410) and hands the request to the delivery use case once
(:class:`backend.services.triggers.webhook_delivery.WebhookDelivery`: route, rate limit, body
limit, authentication, run input, start, wait, answer; its module doc lists the answers).
The front door (backend/api/webhook_front.py) calls :func:`deliver` the same way.
``/hooks/test/{token}`` is the designer's test URL: while the designer listens, the next
request is parsed with the draft's settings and kept for field mapping; no run starts.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from litestar import Controller, Request, Response, route
from litestar.enums import HttpMethod
from litestar.exceptions import HTTPException
from litestar.params import FromPath

from backend.api.webhook_parts import to_response
from backend.auth.policy import Permission
from backend.runtime import Runtime
from backend.services.triggers import webhook_listening as listening
from backend.services.triggers import webhooks as hooks
from backend.services.triggers.answer_cutoff import app_cutoff
from backend.services.triggers.delivery_gate import DeliveryGate
from backend.services.triggers.webhook_answers import Answer, BodyReader, Rejection
from backend.services.triggers.webhook_delivery import DeliveryRequest, WebhookDelivery

METHODS: list[HttpMethod] = [
    HttpMethod.GET,
    HttpMethod.POST,
    HttpMethod.PUT,
    HttpMethod.PATCH,
    HttpMethod.DELETE,
]


async def cached_endpoint(runtime: Runtime, token: str) -> hooks.Endpoint | None:
    """The endpoint of webhook ``token`` (cached for ``webhook_cache_seconds``)."""
    return await hooks.cached_endpoint(
        runtime.sessionmaker, token, runtime.settings.webhook_cache_seconds
    )


def deliverable(endpoint: hooks.Endpoint | None) -> bool:
    """True when ``endpoint`` starts runs: it exists, is a published webhook, and its
    workflow is not archived (else the answer is 404 or 410, see :func:`receive`)."""
    return (
        endpoint is not None
        and not endpoint.archived
        and endpoint.version is not None
        and endpoint.is_webhook
    )


def _not_deliverable(endpoint: hooks.Endpoint | None) -> str:
    """The 404 detail for a webhook URL that starts no runs: no workflow, none published,
    or a published version that starts from another trigger (its URL exists from the
    workflow's creation, so a Webhook trigger added later keeps it)."""
    if endpoint is None:
        return "no workflow at this webhook URL"
    if endpoint.version is None:
        return "this workflow has no published version yet: publish it to receive webhooks"
    return "the published version of this workflow has no Webhook trigger"


async def _read_body(request: Request[Any, Any, Any], limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise Rejection(413, f"body larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Rejection(413, f"body larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


_GATE = "railyard_delivery_gate"


def use_case(request: Request[Any, Any, Any]) -> WebhookDelivery:
    """The delivery use case over the app's runtime as it is now, with the app's one
    delivery gate and answer cutoff (made on first use)."""
    state = request.app.state
    gate = state.get(_GATE)
    if gate is None:
        gate = state[_GATE] = DeliveryGate()
    runtime: Runtime = state.runtime
    return WebhookDelivery(
        runtime.sessionmaker,
        runtime.redis,
        runtime.settings,
        runtime.execution,
        gate=gate,
        cutoff=app_cutoff(state),
    )


def delivery_request(
    request: Request[Any, Any, Any], suffix: str, read: BodyReader
) -> DeliveryRequest:
    """What the use case needs of ``request``: method, path, query, lower-cased headers,
    the path suffix and the body reader ``read``."""
    return DeliveryRequest(
        method=request.method,
        path=request.url.path,
        query=list(request.query_params.multi_items()),
        headers={k.lower(): v for k, v in request.headers.items()},
        suffix=suffix,
        read=read,
    )


async def deliver(
    endpoint: hooks.Endpoint, suffix: str, request: Request[Any, Any, Any], read: BodyReader
) -> Answer:
    """Answer one webhook request for ``endpoint`` (:func:`deliverable`) through the
    delivery use case; ``read`` gives the body. Raises what storing the run raises (the
    app's error handlers answer it: 503 while PostgreSQL or Redis is unreachable)."""
    return await use_case(request).deliver(endpoint, delivery_request(request, suffix, read))


class WebhookController(Controller):
    """Webhook endpoints of published workflows, and the designer's test URL."""

    path = "/hooks"
    tags = ["webhooks"]

    @route(
        "/test/{token:str}",
        http_method=METHODS,
        operation_id=lambda _h, method, _p: f"test_webhook_{method.lower()}",
        request_max_body_size=None,
        opt={"permission": Permission.PUBLIC},
    )
    async def test_call(
        self, token: FromPath[str], request: Request[Any, Any, Any]
    ) -> Response[Any]:
        """Capture one request for the designer (no run): 200, or 404 when not listening."""
        return await self._test(token, "", request)

    @route(
        "/test/{token:str}/{suffix:path}",
        http_method=METHODS,
        operation_id=lambda _h, method, _p: f"test_webhook_suffix_{method.lower()}",
        request_max_body_size=None,
        opt={"permission": Permission.PUBLIC},
    )
    async def test_call_suffix(
        self, token: FromPath[str], suffix: FromPath[str], request: Request[Any, Any, Any]
    ) -> Response[Any]:
        """The test URL with a path suffix."""
        return await self._test(token, suffix, request)

    @route(
        "/{token:str}",
        http_method=METHODS,
        operation_id=lambda _h, method, _p: f"receive_webhook_{method.lower()}",
        request_max_body_size=None,
        opt={"permission": Permission.PUBLIC},
    )
    async def receive(self, token: FromPath[str], request: Request[Any, Any, Any]) -> Response[Any]:
        """Accept a request for the workflow with webhook ``token`` (see the module doc)."""
        return await self._receive(token, "", request)

    @route(
        "/{token:str}/{suffix:path}",
        http_method=METHODS,
        operation_id=lambda _h, method, _p: f"receive_webhook_suffix_{method.lower()}",
        request_max_body_size=None,
        opt={"permission": Permission.PUBLIC},
    )
    async def receive_suffix(
        self, token: FromPath[str], suffix: FromPath[str], request: Request[Any, Any, Any]
    ) -> Response[Any]:
        """The webhook URL with the trigger's readable path suffix."""
        return await self._receive(token, suffix, request)

    async def _receive(
        self, token: str, suffix: str, request: Request[Any, Any, Any]
    ) -> Response[Any]:
        runtime: Runtime = request.app.state.runtime
        endpoint = await cached_endpoint(runtime, token)
        if endpoint is not None and endpoint.archived:
            raise HTTPException(
                status_code=410, detail="this workflow was archived: its webhook starts no runs"
            )
        if endpoint is None or not deliverable(endpoint):
            raise HTTPException(status_code=404, detail=_not_deliverable(endpoint))
        answer = await deliver(endpoint, suffix, request, partial(_read_body, request))
        return to_response(answer)

    async def _test(
        self, token: str, suffix: str, request: Request[Any, Any, Any]
    ) -> Response[Any]:
        runtime: Runtime = request.app.state.runtime
        async with runtime.sessionmaker() as session:
            endpoint = await hooks.load_endpoint(session, token, draft=True)
        if endpoint is None or not endpoint.is_webhook:
            raise HTTPException(status_code=404, detail="no webhook trigger at this test URL")
        if not await listening.is_listening(runtime.redis, endpoint.workflow_id):
            raise HTTPException(
                status_code=404,
                detail="not listening: click 'Listen for test call' in the designer first",
            )
        request_ = delivery_request(request, suffix, partial(_read_body, request))
        return to_response(await use_case(request).capture_test_call(endpoint, request_))
