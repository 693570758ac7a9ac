"""``/hooks/{token}[/{suffix}]``: start runs from HTTP requests (the token is the secret).

Order of checks (each failure is answered before any run exists; rejections other than
404/429 are audited in ``webhook_deliveries`` and ``events``):

1. unknown token or never published -> 404; archived workflow -> 410; disabled -> 404;
   wrong path suffix -> 404;
   method not in the trigger's ``methods`` -> 405 with ``Allow``;
2. rate limit (requests per minute) -> 429 with ``Retry-After``;
3. body over ``max_body`` (declared or streamed) -> 413;
4. authentication (header token, basic, HMAC presets) -> 401;
5. body parsing -> 400 naming what is malformed and where; a body breaking the trigger's
   body schema (version 4) -> 422 naming each field, or with ``mark_invalid`` a run that
   fails at once with kind ``invalid_body`` (backend/triggers/body_schema.py; the same
   for each event of a CloudEvents delivery and for a test call);
6. the run is stored (files first, by reference), then the answer: 202 with the run id and
   links, the Respond step's answer (``respond_node``), or the run's output
   (``last_step``), waiting at most ``wait_timeout`` seconds before falling back to 202
   (also when the process stops meanwhile: backend/api/answer_cutoff.py).

``Idempotency-Key`` or the configured delivery-id header returns the original run for
``idempotency_hours`` (default 24). A webhook taking CloudEvents (``cloudevents``, version
2) parses and starts its runs in backend/api/webhook_cloudevents.py from step 5 on: one
run per event, deduplicated by the event's ``source`` and ``id``. ``/hooks/test/{token}``
is the designer's test URL: while the designer listens, the next request is parsed with
the draft's settings and kept for field mapping; no run starts.
"""

from __future__ import annotations

import time
import uuid
from functools import partial
from typing import Any

import msgspec
from litestar import Controller, MediaType, Request, Response, route
from litestar.enums import HttpMethod
from litestar.exceptions import HTTPException
from litestar.params import FromPath

from backend.api import answer_cutoff
from backend.api import webhook_cloudevents as cloudevents
from backend.api.delivery_gate import (
    LARGE_BODY_BYTES,
    RETRY_AFTER_SECONDS,
    DeliveryGate,
    GateFull,
    Place,
)
from backend.api.run_links import delivery_accepted
from backend.api.webhook_parts import (
    Answer,
    BodyReader,
    Rejection,
    body_rejection,
    error_answer,
    held_key,
    verified_body,
)
from backend.auth.policy import Permission
from backend.engine.states import RunStatus
from backend.runtime import Runtime
from backend.services import run_watch
from backend.services import webhook_listening as listening
from backend.services import webhooks as hooks
from backend.triggers import rate_limit
from backend.triggers.body_schema import BodyRefused, verdict
from backend.triggers.response_headers import answer_headers, safe_media_type
from backend.triggers.webhook_input import BodyError, build_run_input, parse_request_body

DEFAULT_WAIT_TIMEOUT = 30.0
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


def _methods(config: dict[str, Any]) -> list[str]:
    text = str(config.get("methods") or "POST")
    return [m.strip().upper() for m in text.split(",") if m.strip()] or ["POST"]


def _check_route(config: dict[str, Any], method: str, suffix: str) -> None:
    if config.get("enabled", True) is False:
        raise Rejection(404, "the webhook is disabled")
    wanted = str(config.get("path_suffix") or "").strip("/")
    if suffix.strip("/") != wanted:
        raise Rejection(404, f"unknown path suffix {suffix!r}")
    allowed = _methods(config)
    if method not in allowed:
        raise Rejection(405, f"method {method} not allowed", {"Allow": ", ".join(allowed)})


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


async def _prepare(
    runtime: Runtime,
    endpoint: hooks.Endpoint,
    request: Request[Any, Any, Any],
    headers: dict[str, str],
    read: BodyReader,
) -> tuple[dict[str, Any], Any]:
    """Limit, authenticate and parse; returns (run input without files, parsed body)."""
    raw = await verified_body(runtime, endpoint, headers, read)
    try:
        parsed = parse_request_body(
            headers.get("content-type", ""), raw, runtime.settings.max_json_depth
        )
    except BodyError as exc:
        raise Rejection(400, str(exc), field="body") from exc
    run_input = build_run_input(
        method=request.method,
        path=request.url.path,
        query=request.query_params.multi_items(),
        headers=headers,
        body=parsed.body,
        config=endpoint.config,
        redact=runtime.settings.redact_headers,
    )
    try:  # mark_invalid: the run input carries the problems, its run fails at the trigger
        run_input = verdict(endpoint.invalid_body, endpoint.config.get("body_schema"), run_input)
    except BodyRefused as refused:
        raise body_rejection(refused) from None
    return run_input, parsed


async def _audit(
    runtime: Runtime, workflow_id: uuid.UUID, method: str, rej: Rejection, *, test: bool = False
) -> None:
    async with runtime.sessionmaker() as session, session.begin():
        await hooks.record_rejection(
            session,
            workflow_id,
            method=method,
            status_code=rej.status,
            reason=rej.reason,
            now=runtime.execution.clock.now(),
            test=test,
        )


async def deliver(
    endpoint: hooks.Endpoint, suffix: str, request: Request[Any, Any, Any], read: BodyReader
) -> Answer:
    """Answer one webhook request for ``endpoint`` (:func:`deliverable`), from check 1's
    path suffix and method on (see the module doc): a rejection, the 202 with the run's
    links, or the run's answer. ``request`` gives the method, path, query and headers;
    ``read`` the body. A large body waits for a place of the process's
    :class:`~backend.api.delivery_gate.DeliveryGate` once read (429 when too many of the
    workflow's wait). Raises what storing the run raises (the app's error handlers
    answer it: 503 while PostgreSQL or Redis is unreachable)."""
    gate = request.app.state.get(_GATE)
    if gate is None:
        gate = request.app.state[_GATE] = DeliveryGate()
    place = Place(gate, endpoint.workflow_id)
    try:
        return await _deliver(endpoint, suffix, request, read, place)
    finally:
        place.release()


_GATE = "railyard_delivery_gate"


def _gated(read: BodyReader, place: Place) -> BodyReader:
    """``read``, then a place of the gate for a large body (429 when too many wait)."""

    async def gated(limit: int) -> bytes:
        raw = await read(limit)
        if len(raw) > LARGE_BODY_BYTES:
            try:
                await place.take(len(raw))
            except GateFull as exc:
                retry = {"Retry-After": str(RETRY_AFTER_SECONDS)}
                raise Rejection(429, str(exc), retry, audit=False) from None
        return raw

    return gated


async def _deliver(
    endpoint: hooks.Endpoint,
    suffix: str,
    request: Request[Any, Any, Any],
    read: BodyReader,
    place: Place,
) -> Answer:
    """:func:`deliver` once the gate is in place (``read`` takes a place for a large
    body; it is given back once the run is stored, before waiting for its answer)."""
    runtime: Runtime = request.app.state.runtime
    config = endpoint.config
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        _check_route(config, request.method, suffix)
        limit = int(config.get("rate_limit") or 0)
        if limit > 0:
            retry = await rate_limit.check(
                runtime.redis, str(endpoint.workflow_id), limit, time.time()
            )
            if retry is not None:
                raise Rejection(
                    429,
                    f"rate limit of {limit} requests per minute reached",
                    {"Retry-After": str(int(retry))},
                    audit=False,
                )
        if endpoint.cloudevents:  # backend/api/webhook_cloudevents.py
            events, batch = await cloudevents.read_events(
                runtime, endpoint, headers, _gated(read, place)
            )
        else:
            run_input, parsed = await _prepare(
                runtime, endpoint, request, headers, _gated(read, place)
            )
    except Rejection as rej:
        if rej.audit and rej.status != 404:
            await _audit(runtime, endpoint.workflow_id, request.method, rej)
        return error_answer(rej, request.url.path)
    if endpoint.cloudevents:
        return await cloudevents.start_runs(runtime, endpoint, events, batch=batch)
    if parsed.files:
        async with runtime.sessionmaker() as session, session.begin():
            run_input["files"] = await hooks.store_files(
                session, endpoint.workflow_id, parsed.files
            )
    key = await _idempotency_key(runtime, endpoint, headers)
    assert endpoint.version is not None
    mode = config.get("respond") or "immediately"
    waits = mode in ("respond_node", "last_step")
    run_id = uuid.uuid4()
    # a waiting webhook listens to the run's notices before the run is stored; only to
    # this process's while the run may be executed here (eager), else on Redis too
    here = waits and runtime.execution.eager.has_room()
    async with run_watch.early_watch(
        runtime.redis, run_id, enabled=waits, remote=not here
    ) as watched:
        started = await runtime.execution.start_run(
            endpoint.version,
            run_input,
            trigger="webhook",
            idempotency_key=key,
            run_id=run_id,
            eager=waits,  # its first step may run here (backend/services/execution/eager.py)
        )
        place.release()  # stored: the wait for its answer holds no place
        # a run queued behind the workflow's concurrency limit is answered 202 at once
        if waits and started.status != "queued":
            late = False
            if watched is not None and not watched.remote and started.eager is None:
                late = True  # not executed here after all: read the run first ...
                if not RunStatus(started.status).terminal:
                    await watched.go_remote()  # ... having subscribed, unless it ended
            timeout = float(config.get("wait_timeout") or DEFAULT_WAIT_TIMEOUT)
            waiting = run_watch.wait_for_answer(
                runtime.sessionmaker,
                runtime.redis,
                started.run_id,
                timeout,
                last_step=mode == "last_step",
                # an idempotent replay returns an earlier run: not the one subscribed
                watched=watched if started.created else None,
                started_status=None if late else started.status,
                failure_detail=endpoint.failure_detail,
            )
            # a stopping process answers 202 before its grace ends (answer_cutoff.py)
            answer = await answer_cutoff.unless_cut(request.app.state, waiting)
            if answer is not None:
                return _respond(answer)
    links = delivery_accepted(runtime, started.run_id, started.status)
    return Answer(202, msgspec.json.encode(links), headers={"Location": links.status_url})


async def _idempotency_key(
    runtime: Runtime, endpoint: hooks.Endpoint, headers: dict[str, str]
) -> str | None:
    value = headers.get("idempotency-key")
    delivery_header = str(endpoint.config.get("delivery_id_header") or "").lower()
    if not value and delivery_header:
        value = headers.get(delivery_header)
    return await held_key(runtime, endpoint, value) if value else None


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
            raise HTTPException(status_code=404, detail="no published workflow at this webhook")
        answer = await deliver(endpoint, suffix, request, partial(_read_body, request))
        return answer.response()

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
        headers = {k.lower(): v for k, v in request.headers.items()}
        now = runtime.execution.clock.now()
        try:
            _check_route({**endpoint.config, "enabled": True}, request.method, suffix)
            read = partial(_read_body, request)
            if endpoint.cloudevents:  # the first event is what the designer maps from
                events, _batch = await cloudevents.read_events(runtime, endpoint, headers, read)
                run_input, files = (events[0].input if events else None), []
            else:
                run_input, parsed = await _prepare(runtime, endpoint, request, headers, read)
                files = parsed.files
        except Rejection as rej:
            async with runtime.sessionmaker() as session, session.begin():
                await hooks.save_test_call(session, endpoint.workflow_id, now, None, rej.reason)
            await _audit(runtime, endpoint.workflow_id, request.method, rej, test=True)
            await listening.stop_listening(runtime.redis, endpoint.workflow_id)
            return error_answer(rej, request.url.path).response()
        async with runtime.sessionmaker() as session, session.begin():
            if files and run_input is not None:
                run_input["files"] = await hooks.store_files(session, endpoint.workflow_id, files)
            await hooks.save_test_call(session, endpoint.workflow_id, now, run_input)
        await listening.stop_listening(runtime.redis, endpoint.workflow_id)
        return Response(
            {"test": True, "message": "test call received; see the designer"}, status_code=200
        )


def _respond(answer: dict[str, Any]) -> Answer:
    """The HTTP answer of a Respond to Webhook step (or the run's output / error).

    The workflow's headers pass through except those that would act on Railyard's own
    origin (:func:`backend.triggers.response_headers.answer_headers`: cookies, security
    policies; the security headers are then set for every ``/hooks/`` answer), and a
    script content type is served as text (:func:`safe_media_type`).
    """
    body = answer.get("body")
    headers = answer_headers(answer.get("headers") or {})
    status = int(answer.get("status") or 200)
    if isinstance(body, str):
        media = headers.pop("content-type", MediaType.TEXT)
        return Answer(status, body.encode(), safe_media_type(media), headers)
    media = headers.pop("content-type", MediaType.JSON)
    return Answer(status, msgspec.json.encode(body), safe_media_type(media), headers)
