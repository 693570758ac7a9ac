"""The webhook delivery use case: one request to ``/hooks/<token>[/<suffix>]`` of a
deliverable endpoint, from its route check to its answer, in one sequence
(:meth:`WebhookDelivery.deliver`):

1. route: a published config that does not decode (stored before publish checked its
   values) -> 503 naming the field, logged (a sender retries once it is fixed and
   published again); the designer's test URL answers a draft's that way with 422;
   disabled or wrong path suffix -> 404; method not in the trigger's ``methods`` -> 405
   with ``Allow``;
2. rate limit (requests per minute) -> 429 with ``Retry-After``;
3. body over ``max_body`` (declared or streamed) -> 413; a large body waits for a place
   of the process's :class:`~backend.services.triggers.delivery_gate.DeliveryGate` (429 when too
   many of the workflow's wait);
4. authentication (header token, basic, HMAC presets) -> 401;
5. the run input: body parsing -> 400 naming what is malformed and where; a body breaking
   the trigger's body schema (version 4) -> 422 naming each field, or with
   ``mark_invalid`` a run that fails at once with kind ``invalid_body``
   (backend/triggers/body_schema.py; the same for each event of a CloudEvents delivery
   and for a test call); CloudEvents (version 2) -> one run per event
   (backend/services/triggers/webhook_cloudevents.py);
6. the run is stored (files first, by reference) under the delivery's idempotency key,
   then the answer: 202 with the run's links, the Respond step's answer
   (``respond_node``) or the run's output (``last_step``), waiting at most
   ``wait_timeout`` seconds (and never past the process's answer cutoff,
   backend/services/triggers/answer_cutoff.py) before falling back to 202.

Rejections other than 404 and 429 are audited in ``webhook_deliveries`` and ``events``.
The speed devices of step 6 sit behind one seam, :class:`~backend.services.
webhook_answer_wait.AnswerWait` (early subscription, eager first step); the gathered
writes of concurrent starts are the run store's (``run_inserts.RunInserts``).
:meth:`WebhookDelivery.capture_test_call` runs steps 1 and 3-5 for the designer's test
URL. The web layer only turns the request into a :class:`DeliveryRequest` and sends the
:class:`~backend.services.triggers.webhook_answers.Answer`.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.services.runs.execution import Execution
from backend.services.triggers import webhook_cloudevents as cloudevents
from backend.services.triggers import webhook_listening as listening
from backend.services.triggers import webhooks as hooks
from backend.services.triggers.answer_cutoff import Cutoff, unless_cut
from backend.services.triggers.delivery_gate import (
    LARGE_BODY_BYTES,
    RETRY_AFTER_SECONDS,
    DeliveryGate,
    GateFull,
    Place,
)
from backend.services.triggers.webhook_answer_wait import AnswerWait
from backend.services.triggers.webhook_answers import (
    Answer,
    BodyReader,
    Rejection,
    body_rejection,
    error_answer,
    run_answer,
    run_links,
    started_answer,
    test_call_answer,
)
from backend.services.triggers.webhook_keys import DeliveryKeys
from backend.settings import Settings
from backend.triggers import rate_limit
from backend.triggers.body_schema import BodyRefused, verdict
from backend.triggers.webhook_auth import AuthFailure, verify
from backend.triggers.webhook_input import (
    BodyError,
    ParsedBody,
    build_run_input,
    parse_request_body,
)

__all__ = ["DeliveryRequest", "WebhookDelivery"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeliveryRequest:
    """What the use case needs of an HTTP request: ``headers`` with lower-case names,
    ``suffix`` the path after the token (``""`` or ``"/a/b"``), ``read`` the body."""

    method: str
    path: str
    query: list[tuple[str, Any]]
    headers: dict[str, str]
    suffix: str
    read: BodyReader


class WebhookDelivery:
    """The webhook use cases over one process's resources; ``gate`` and ``cutoff`` are the
    app's (one :class:`DeliveryGate` and one answer :class:`Cutoff` per app, shared by its
    deliveries)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: Redis,
        settings: Settings,
        execution: Execution,
        *,
        gate: DeliveryGate | None = None,
        cutoff: Cutoff | None = None,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.redis = redis
        self.settings = settings
        self.execution = execution
        self.gate = gate or DeliveryGate()
        self.cutoff = cutoff or Cutoff()
        self.keys = DeliveryKeys(sessionmaker, execution.clock)

    async def deliver(self, endpoint: hooks.Endpoint, request: DeliveryRequest) -> Answer:
        """Answer one request for a deliverable ``endpoint`` (see the module doc). Raises
        what storing the run raises (503 while PostgreSQL or Redis is unreachable, answered
        by the web layer's error handlers)."""
        place = Place(self.gate, endpoint.workflow_id)
        try:
            try:
                self._check_route(endpoint, request.method, request.suffix)
                await self._check_rate(endpoint)
                read = self._gated(request.read, place)
                if endpoint.cloudevents:
                    events, batch = cloudevents.read_events(
                        endpoint,
                        await self._verified_body(endpoint, request.headers, read),
                        request.headers,
                        self.settings.max_json_depth,
                    )
                else:
                    run_input, parsed = await self._run_input(endpoint, request, read)
            except Rejection as rej:
                if rej.audit and rej.status != 404:
                    await self._audit(endpoint.workflow_id, request.method, rej)
                return error_answer(rej, request.path)
            if endpoint.cloudevents:
                starts = cloudevents.start_runs(self.execution, self.keys, endpoint, events)
                return cloudevents.answer(
                    [self._links(s.run_id, s.status) for s in await starts], batch=batch
                )
            return await self._start_and_answer(endpoint, request, run_input, parsed, place)
        finally:
            place.release()

    async def _start_and_answer(
        self,
        endpoint: hooks.Endpoint,
        request: DeliveryRequest,
        run_input: dict[str, Any],
        parsed: ParsedBody,
        place: Place,
    ) -> Answer:
        """Step 6: store the run and answer (its answer when the trigger waits for one)."""
        assert endpoint.version is not None
        config = endpoint.config
        if parsed.files:
            async with self.sessionmaker() as session, session.begin():
                run_input["files"] = await hooks.store_files(
                    session, endpoint.workflow_id, parsed.files
                )
        key = await self.keys.for_request(endpoint, request.headers)
        wait = AnswerWait(self.execution, self.sessionmaker, self.redis, waits=config.waits)
        async with wait.watching(uuid.uuid4()) as run_id:
            started = await self.execution.start_run(
                endpoint.version,
                run_input,
                trigger="webhook",
                idempotency_key=key,
                run_id=run_id,
                eager=wait.eager,
            )
            place.release()  # stored: the wait for its answer holds no place
            answering = wait.answer(
                started,
                config.answer_timeout,
                last_step=config.respond == "last_step",
                failure_detail=endpoint.failure_detail,
            )
            if answering is not None:
                # a stopping process answers 202 before its grace ends (answer_cutoff.py)
                answer = await unless_cut(self.cutoff, answering)
                if answer is not None:
                    return run_answer(answer)
        return started_answer(self._links(started.run_id, started.status))

    async def capture_test_call(self, endpoint: hooks.Endpoint, request: DeliveryRequest) -> Answer:
        """The designer's test URL: check the route (a disabled trigger too), read,
        authenticate and parse the request with the draft's settings and keep it for
        field mapping (the first event of CloudEvents); no run starts, listening stops.
        A rejection is kept (and audited) as the test call's error."""
        now = self.execution.clock.now()
        try:
            self._check_route(endpoint, request.method, request.suffix, test=True)
            if endpoint.cloudevents:
                events, _batch = cloudevents.read_events(
                    endpoint,
                    await self._verified_body(endpoint, request.headers, request.read),
                    request.headers,
                    self.settings.max_json_depth,
                )
                run_input, files = (events[0].input if events else None), []
            else:
                run_input, parsed = await self._run_input(endpoint, request, request.read)
                files = parsed.files
        except Rejection as rej:
            async with self.sessionmaker() as session, session.begin():
                await hooks.save_test_call(session, endpoint.workflow_id, now, None, rej.reason)
            await self._audit(endpoint.workflow_id, request.method, rej, test=True)
            await listening.stop_listening(self.redis, endpoint.workflow_id)
            return error_answer(rej, request.path)
        async with self.sessionmaker() as session, session.begin():
            if files and run_input is not None:
                run_input["files"] = await hooks.store_files(session, endpoint.workflow_id, files)
            await hooks.save_test_call(session, endpoint.workflow_id, now, run_input)
        await listening.stop_listening(self.redis, endpoint.workflow_id)
        return test_call_answer()

    @staticmethod
    def _check_route(
        endpoint: hooks.Endpoint, method: str, suffix: str, *, test: bool = False
    ) -> None:
        """Step 1; ``test``: the designer's test URL, which answers a disabled trigger."""
        config = endpoint.config
        if endpoint.config_error is not None:
            problem = endpoint.config_error
            detail = str(problem).removeprefix("invalid config: ")
            if test:  # the draft being edited: the author fixes it and calls again
                reason = f"the draft's webhook configuration is invalid: {detail}"
                raise Rejection(422, reason, field=problem.field)
            log.error(
                "workflow %s: invalid published webhook config: %s", endpoint.workflow_id, detail
            )
            raise Rejection(
                503,
                f"the workflow's webhook configuration is invalid: {detail} "
                "(fix it and publish again)",
                field=problem.field,
            )
        if not config.enabled and not test:
            raise Rejection(404, "the webhook is disabled")
        if suffix.strip("/") != config.suffix:
            raise Rejection(404, f"unknown path suffix {suffix!r}")
        allowed = config.allowed_methods
        if method not in allowed:
            raise Rejection(405, f"method {method} not allowed", {"Allow": ", ".join(allowed)})

    async def _check_rate(self, endpoint: hooks.Endpoint) -> None:
        """Step 2: the trigger's rate limit (per workflow, per minute, in Redis)."""
        limit = endpoint.config.rate_limit
        if limit <= 0:
            return
        retry = await rate_limit.check(self.redis, str(endpoint.workflow_id), limit, time.time())
        if retry is not None:
            raise Rejection(
                429,
                f"rate limit of {limit} requests per minute reached",
                {"Retry-After": str(int(retry))},
                audit=False,
            )

    @staticmethod
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

    async def _verified_body(
        self, endpoint: hooks.Endpoint, headers: dict[str, str], read: BodyReader
    ) -> bytes:
        """Steps 3 and 4: the body, at most the trigger's ``max_body`` (else the server's
        limit) bytes, once the trigger's authentication accepted it (413, 401)."""
        config = endpoint.config
        limit = config.max_body if config.max_body is not None else self.settings.webhook_max_body
        raw = await read(limit)
        try:
            verify(config, endpoint.secret, headers, raw, time.time())
        except AuthFailure as exc:
            raise Rejection(401, str(exc)) from exc
        return raw

    async def _run_input(
        self, endpoint: hooks.Endpoint, request: DeliveryRequest, read: BodyReader
    ) -> tuple[dict[str, Any], ParsedBody]:
        """Steps 3-5: the run input (without files) and the parsed body."""
        raw = await self._verified_body(endpoint, request.headers, read)
        try:
            parsed = parse_request_body(
                request.headers.get("content-type", ""), raw, self.settings.max_json_depth
            )
        except BodyError as exc:
            raise Rejection(400, str(exc), field="body") from exc
        run_input = build_run_input(
            method=request.method,
            path=request.path,
            query=request.query,
            headers=request.headers,
            body=parsed.body,
            config=endpoint.config,
            redact=self.settings.redact_headers,
        )
        try:  # mark_invalid: the run input carries the problems, its run fails at the trigger
            run_input = verdict(endpoint.invalid_body, endpoint.config.body_schema, run_input)
        except BodyRefused as refused:
            raise body_rejection(refused) from None
        return run_input, parsed

    async def _audit(
        self, workflow_id: uuid.UUID, method: str, rej: Rejection, *, test: bool = False
    ) -> None:
        async with self.sessionmaker() as session, session.begin():
            await hooks.record_rejection(
                session,
                workflow_id,
                method=method,
                status_code=rej.status,
                reason=rej.reason,
                now=self.execution.clock.now(),
                test=test,
            )

    def _links(self, run_id: uuid.UUID, status: str) -> Any:
        return run_links(self.settings.base_url, run_id, status)
