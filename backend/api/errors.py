"""Exception handlers: domain errors become clear JSON errors, never a stack trace."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException
from litestar.exceptions.responses import create_exception_response

from backend.api.schemas import ErrorOut
from backend.services.availability import unavailable_service
from backend.services.execution import RunNotActive, RunNotFound
from backend.services.storable import UnstorableInput, refused_by_database
from backend.services.workflows import InvalidInput, PublishRejected, WorkflowNotFound

log = logging.getLogger(__name__)


def _json(status: int, detail: str, **extra: object) -> Response[bytes]:
    body = msgspec.json.encode(ErrorOut(status_code=status, detail=detail, **extra))  # type: ignore[arg-type]
    return Response(body, status_code=status, media_type=MediaType.JSON)


def not_found(_: Request, exc: LookupError) -> Response[bytes]:
    return _json(404, str(exc).strip("'\""))


def invalid_input(_: Request, exc: InvalidInput | UnstorableInput) -> Response[bytes]:
    return _json(400, str(exc), field=exc.field)


def conflict(_: Request, exc: Exception) -> Response[bytes]:
    return _json(409, str(exc))


def publish_rejected(_: Request, exc: PublishRejected) -> Response[bytes]:
    return _json(422, str(exc), diagnostics=exc.diagnostics)


RETRY_AFTER_SECONDS = 5
"""``Retry-After`` of a 503 answered while PostgreSQL or Redis is unreachable, in seconds."""

UNAVAILABLE_DETAIL = {
    "database": "database unavailable, try again shortly",
    "redis": "Redis unavailable, try again shortly",
}


def unexpected_error(request: Request, exc: Exception) -> Response[bytes]:
    """Every error no other handler takes (Litestar's ``500`` handler slot).

    Text the database refused as unstorable answers 400. An outage of PostgreSQL or
    Redis, wherever it sits in the exception's chain
    (:func:`backend.services.availability.unavailable_service`), answers 503 with
    ``Retry-After``; anything else is a bug: logged with its traceback, answered 500
    without one. An ``HTTPException`` raised as 500 keeps Litestar's own answer.
    """
    if isinstance(exc, HTTPException):
        return create_exception_response(request, exc)  # type: ignore[return-value]
    if refused_by_database(exc):  # missed by StorableInputMiddleware (e.g. a huge body)
        log.warning("unstorable text on %s %s: %s", request.method, request.url.path, exc)
        return _json(
            400, "a value contains U+0000 (NUL) or a lone surrogate, which cannot be stored"
        )
    service = unavailable_service(exc)
    if service is not None:
        log.warning(
            "%s unavailable on %s %s: %s: %s",
            service,
            request.method,
            request.url.path,
            type(exc).__name__,
            exc,
        )
        response = _json(503, UNAVAILABLE_DETAIL[service])
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _json(500, "internal error (logged)")


ErrorHandler = Callable[[Request[Any, Any, Any], Any], Response[Any]]

API_EXCEPTION_HANDLERS: dict[int | type[Exception], ErrorHandler] = {
    WorkflowNotFound: not_found,
    RunNotFound: not_found,
    RunNotActive: conflict,
    InvalidInput: invalid_input,
    UnstorableInput: invalid_input,
    PublishRejected: publish_rejected,
    500: unexpected_error,
}
