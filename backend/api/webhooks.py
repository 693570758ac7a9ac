"""``/hooks/{token}``: start runs from HTTP requests (no login; the token is the secret).

The run is stored before the answer: 202 with the run id and links, or, when the trigger
is configured to respond from a Respond to Webhook step, the status, headers and body that
step produced. Waiting is bounded by the trigger's ``wait_timeout`` (seconds, default 30);
after it, the answer is 202 with the status URL.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import msgspec
from litestar import Controller, MediaType, Request, Response, route
from litestar.exceptions import HTTPException
from sqlalchemy import select

from backend.api.workflows import run_started
from backend.db.models import Run
from backend.runtime import Runtime
from backend.services import workflows as svc
from backend.services.channels import run_channel
from backend.triggers.webhook_input import BodyError, parse_body, parse_query

DEFAULT_WAIT_TIMEOUT = 30.0


class WebhookController(Controller):
    """Webhook endpoints of published workflows."""

    path = "/hooks"
    tags = ["webhooks"]

    @route(
        "/{token:str}",
        http_method=["POST", "PUT", "PATCH", "GET"],
        operation_id=lambda _handler, method, _path: f"receive_webhook_{method.lower()}",
        request_max_body_size=None,
    )
    async def receive(self, token: str, request: Request) -> Response[Any]:
        """Accept a request for the workflow with webhook ``token``.

        404 unknown token or never published; 413 body over the limit; 400 malformed body.
        """
        runtime: Runtime = request.app.state.runtime
        limit = runtime.settings.webhook_max_body
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise HTTPException(status_code=413, detail=f"body larger than {limit} bytes")
        raw = await request.body()
        if len(raw) > limit:
            raise HTTPException(status_code=413, detail=f"body larger than {limit} bytes")
        try:
            body = parse_body(request.headers.get("content-type", ""), raw)
        except BodyError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        async with runtime.sessionmaker() as session:
            wf = await svc.workflow_by_webhook_token(session, token)
            version = await svc.active_version(session, wf) if wf is not None else None
        if wf is None or version is None:
            raise HTTPException(status_code=404, detail="no published workflow at this webhook")
        run_input = {
            "method": request.method,
            "path": request.url.path,
            "query": parse_query(request.query_params.multi_items()),
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "body": body,
        }
        trigger = _trigger_config(version.graph)
        started = await runtime.execution.start_run(
            version,
            run_input,
            trigger="webhook",
            idempotency_key=_idempotency_key(wf.id, request),
        )
        links = run_started(runtime, started.run_id, started.status)
        # a run queued behind the workflow's concurrency limit is answered 202 at once
        if trigger.get("respond") == "respond_node" and started.status != "queued":
            timeout = float(trigger.get("wait_timeout") or DEFAULT_WAIT_TIMEOUT)
            answer = await wait_for_response(runtime, started.run_id, timeout)
            if answer is not None:
                return _respond(answer)
        return Response(
            msgspec.to_builtins(links), status_code=202, headers={"Location": links.status_url}
        )


def _trigger_config(graph: dict[str, Any]) -> dict[str, Any]:
    for step in graph.get("steps", []):
        if step.get("id") == graph.get("trigger"):
            config: dict[str, Any] = step.get("config") or {}
            return config
    return {}


def _idempotency_key(workflow_id: uuid.UUID, request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    return f"webhook:{workflow_id}:{key}" if key else None


def _respond(answer: dict[str, Any]) -> Response[Any]:
    body = answer.get("body")
    headers = dict(answer.get("headers") or {})
    status = int(answer.get("status") or 200)
    if isinstance(body, str):
        media = headers.pop("content-type", headers.pop("Content-Type", MediaType.TEXT))
        return Response(body, status_code=status, headers=headers, media_type=media)
    return Response(
        msgspec.json.encode(body), status_code=status, headers=headers, media_type=MediaType.JSON
    )


async def wait_for_response(
    runtime: Runtime, run_id: uuid.UUID, timeout: float
) -> dict[str, Any] | None:
    """Wait up to ``timeout`` seconds for the run's Respond step (or its end).

    Returns the response ``{"status", "headers", "body"}``; a run that failed without
    responding gives a 500 answer naming the failed step; ``None`` on timeout.
    """
    pubsub = runtime.redis.pubsub()
    await pubsub.subscribe(run_channel(str(run_id)))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            async with runtime.sessionmaker() as session:
                row = (
                    await session.execute(
                        select(Run.status, Run.response, Run.error).where(Run.id == run_id)
                    )
                ).one()
            status, response, error = row
            if response is not None:
                return dict(response)
            if status in ("failed", "cancelled", "timed_out"):
                return {
                    "status": 500,
                    "headers": {},
                    "body": {"run_id": str(run_id), "status": status, "error": error},
                }
            if status == "succeeded":
                return None
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await pubsub.get_message(ignore_subscribe_messages=True, timeout=min(remaining, 1.0))
    finally:
        await pubsub.unsubscribe()
        await pubsub.aclose()
