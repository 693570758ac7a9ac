"""The delivery use case's steps that decide without I/O (backend/services/
webhook_delivery.py) and the answer-wait seam's choices (webhook_answer_wait.py)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from backend.engine.nodes.base import NodeError
from backend.engine.nodes.trigger_webhook import WebhookConfig
from backend.engine.ports import VersionRow
from backend.services.runs.execution import StartedRun
from backend.services.triggers.webhook_answer_wait import AnswerWait
from backend.services.triggers.webhook_answers import (
    Rejection,
    body_rejection,
    error_answer,
    run_answer,
)
from backend.services.triggers.webhook_delivery import WebhookDelivery
from backend.services.triggers.webhooks import Endpoint
from backend.triggers.body_schema import BodyRefused


def _endpoint(config: WebhookConfig, error: NodeError | None = None) -> Endpoint:
    workflow = uuid.uuid4()
    version = VersionRow(uuid.uuid4(), workflow, 1)
    return Endpoint(workflow, version, config, None, config_error=error)


def _refused(endpoint: Endpoint, method: str, suffix: str, *, test: bool = False) -> Rejection:
    with pytest.raises(Rejection) as caught:
        WebhookDelivery._check_route(endpoint, method, suffix, test=test)
    return caught.value


def test_route_check_answers_404_405_and_names_a_stored_config_at_fault() -> None:
    config = WebhookConfig(methods="put, post", path_suffix="/gh/")
    WebhookDelivery._check_route(_endpoint(config), "PUT", "/gh")
    assert _refused(_endpoint(config), "PUT", "/other").status == 404
    refused = _refused(_endpoint(config), "GET", "/gh")
    assert (refused.status, refused.headers) == (405, {"Allow": "PUT, POST"})
    off = WebhookConfig(enabled=False)
    assert _refused(_endpoint(off), "POST", "").status == 404
    WebhookDelivery._check_route(_endpoint(off), "POST", "", test=True)  # the test URL answers
    error = NodeError("invalid config: max_body: Expected `int` >= 0", field="max_body")
    refused = _refused(_endpoint(WebhookConfig(), error), "POST", "")
    assert refused.status == 503 and refused.field == "max_body"
    assert "webhook configuration is invalid: max_body: Expected `int` >= 0" in refused.reason
    draft = _refused(_endpoint(WebhookConfig(), error), "POST", "", test=True)
    assert draft.status == 422 and draft.field == "max_body"
    assert "the draft's webhook configuration is invalid: max_body" in draft.reason


def test_a_rejection_is_answered_as_problem_details_pointing_into_the_body() -> None:
    refused = BodyRefused([{"field": "body.qty", "message": "m"}])
    rej = body_rejection(refused)
    assert (rej.status, rej.field) == (422, "body.qty")
    answer = error_answer(rej, "/hooks/t")
    assert answer.status == 422 and answer.media_type == "application/problem+json"
    assert b'"pointer":"#/qty"' in answer.body


def test_a_run_answer_keeps_text_as_text_and_serves_scripts_as_text() -> None:
    text = run_answer({"status": 201, "body": "hi"})
    assert (text.status, text.body, text.media_type) == (201, b"hi", "text/plain")
    script = run_answer({"body": "x", "headers": {"Content-Type": "text/javascript"}})
    assert script.media_type == "text/plain; charset=utf-8"
    assert run_answer({"body": {"a": 1}}).body == b'{"a":1}'


def _execution(room: bool) -> Any:
    return SimpleNamespace(eager=SimpleNamespace(has_room=lambda: room))


def _started(status: str) -> StartedRun:
    return StartedRun(uuid.uuid4(), status, True)


def test_the_answer_wait_watches_here_only_while_the_process_has_room() -> None:
    assert AnswerWait(_execution(True), None, None, waits=True).here  # type: ignore[arg-type]
    assert not AnswerWait(_execution(False), None, None, waits=True).here  # type: ignore[arg-type]
    assert not AnswerWait(_execution(True), None, None, waits=False).here  # type: ignore[arg-type]
    assert AnswerWait(_execution(False), None, None, waits=True).eager  # type: ignore[arg-type]


def test_nothing_is_waited_for_without_a_waiting_caller_or_for_a_queued_run() -> None:
    no_wait = AnswerWait(_execution(True), None, None, waits=False)  # type: ignore[arg-type]
    assert no_wait.answer(_started("running"), 1.0, last_step=True, failure_detail=False) is None
    waits = AnswerWait(_execution(True), None, None, waits=True)  # type: ignore[arg-type]
    assert waits.answer(_started("queued"), 1.0, last_step=True, failure_detail=False) is None


def test_a_caller_that_does_not_wait_watches_nothing() -> None:
    async def run() -> None:
        wait = AnswerWait(_execution(True), None, None, waits=False)  # type: ignore[arg-type]
        run_id = uuid.uuid4()
        async with wait.watching(run_id) as watched_id:
            assert watched_id == run_id and wait.watched is None

    asyncio.run(run())


def test_the_front_picks_the_handler_litestar_documents_it_picks() -> None:
    from litestar.exceptions import HTTPException

    from backend.api.webhook_front import exception_handler

    def named(name: str) -> Any:
        return name

    handlers: Any = {404: named("404"), HTTPException: named("http"), 500: named("500")}
    assert exception_handler(handlers, HTTPException(status_code=404)) == "404"
    assert exception_handler(handlers, HTTPException(status_code=418)) == "http"
    assert exception_handler(handlers, ValueError("x")) == "500"
    assert exception_handler({LookupError: "lookup", 500: "500"}, KeyError("k")) == "lookup"
    assert exception_handler({500: "500"}, HTTPException(status_code=418)) is None
    assert exception_handler({}, ValueError("x")) is None


def test_a_delivery_answer_has_the_documented_shape() -> None:
    import msgspec

    from backend.api.schemas import DeliveryAccepted
    from backend.services.triggers.webhook_answers import run_links

    run_id = uuid.uuid4()
    links = run_links("https://r.example/", run_id, "queued")
    documented = DeliveryAccepted(str(run_id), "queued", links.url, links.status_url)
    assert msgspec.json.encode(links) == msgspec.json.encode(documented)
    assert links.status_url == f"https://r.example/api/v1/runs/{run_id}"
