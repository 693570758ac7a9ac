"""What a webhook delivery answers, whichever way the request came in: a rejection
(:class:`Rejection`, answered as problem details by :func:`error_answer`), the 202 with
the run's links (:func:`started_answer`), or the run's own answer (:func:`run_answer`).

An :class:`Answer` is plain data (status, encoded body, media type, headers); the web
layer sends it (backend/api/webhook_parts.py). Pure: msgspec and backend.problems.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from backend import problems
from backend.triggers.body_schema import BodyRefused
from backend.triggers.response_headers import answer_headers, safe_media_type

__all__ = [
    "JSON",
    "TEXT",
    "Answer",
    "BodyReader",
    "CapturedTestCall",
    "Rejection",
    "RunLinks",
    "body_rejection",
    "error_answer",
    "run_answer",
    "run_links",
    "started_answer",
    "test_call_answer",
]

JSON = "application/json"
TEXT = "text/plain"


@dataclass
class Rejection(Exception):
    """A request refused before any run exists; ``field`` names where in the request
    (``body``) when one place is at fault. ``audit``: recorded in ``webhook_deliveries``
    (404s never are)."""

    status: int
    reason: str
    headers: dict[str, str] | None = None
    audit: bool = True
    field: str | None = None
    errors: list[dict[str, str]] | None = None


BodyReader = Callable[[int], Awaitable[bytes]]
"""Reads a request's whole body, at most the given number of bytes (a longer one raises
:class:`Rejection` 413)."""


@dataclass
class Answer:
    """A webhook's HTTP answer: ``body`` encoded; ``media_type`` without parameters
    (``text/...`` is sent with ``; charset=utf-8``)."""

    status: int
    body: bytes
    media_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)


class RunLinks(msgspec.Struct):
    """An accepted run: its id, status, page (``url``) and API status URL (the API's
    ``RunStarted`` shape)."""

    run_id: str
    status: str
    url: str
    status_url: str


class CapturedTestCall(msgspec.Struct):
    """The answer to a call of a webhook's test URL: it was kept for the designer's field
    mapping (``test`` is always true; no run started)."""

    test: bool
    message: str


def test_call_answer() -> Answer:
    """200 with :class:`CapturedTestCall`: the test call was captured."""
    captured = CapturedTestCall(True, "test call received; see the designer")
    return Answer(200, msgspec.json.encode(captured))


def run_links(base_url: str, run_id: uuid.UUID, status: str) -> RunLinks:
    """Links of an accepted run: its page (``/runs/<id>``) and its API status URL."""
    base = base_url.rstrip("/")
    return RunLinks(str(run_id), status, f"{base}/runs/{run_id}", f"{base}/api/v1/runs/{run_id}")


def started_answer(links: RunLinks) -> Answer:
    """202 with the run's links and ``Location`` (its status URL)."""
    return Answer(202, msgspec.json.encode(links), headers={"Location": links.status_url})


def body_rejection(refused: BodyRefused, *, where: str = "", in_request: str = "") -> Rejection:
    """The 422 of a body breaking the trigger's body schema (mode ``reject``): the first
    problem's field in ``field``, every problem in ``errors``. ``where`` prefixes the
    reason (a batch's ``event 1 of the batch: ``); ``in_request`` is where the checked body
    sits in the request body, as a dotted path (a batch's ``1``; ``""``: the whole body),
    for the errors' JSON Pointers."""
    errors = [
        {**p, "pointer": problems.pointer(".".join(filter(None, (in_request, _at(p["field"])))))}
        for p in refused.problems
    ]
    return Rejection(422, f"{where}{refused}", field=refused.problems[0]["field"], errors=errors)


def _at(field: str) -> str:
    """A run input path as a path in what was checked (``body.qty``, ``data.qty`` ->
    ``qty``; the root itself -> ``""``)."""
    return field.partition(".")[2]


def error_answer(rej: Rejection, instance: str) -> Answer:
    """The answer to a rejection of the request to ``instance`` (its path): problem
    details (:mod:`backend.problems`) naming the field when known, and each of
    ``rej.errors`` (``{"field", "message", "pointer"}``) as a finding pointing into the
    body."""
    errors = None
    if rej.errors:  # each {"field": "body.x", "message", "pointer"} (body_rejection)
        errors = [problems.ProblemError(e["message"], pointer=e.get("pointer")) for e in rej.errors]
    body = problems.body(rej.status, rej.reason, instance, field=rej.field, errors=errors)
    return Answer(rej.status, body, media_type=problems.MEDIA_TYPE, headers=rej.headers or {})


def run_answer(answer: dict[str, Any]) -> Answer:
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
        media = headers.pop("content-type", TEXT)
        return Answer(status, body.encode(), safe_media_type(media), headers)
    media = headers.pop("content-type", JSON)
    return Answer(status, msgspec.json.encode(body), safe_media_type(media), headers)
