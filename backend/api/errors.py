"""Exception handlers: domain errors become clear JSON errors, never a stack trace."""

from __future__ import annotations

import logging

import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException

from backend.api.schemas import ErrorOut
from backend.services.execution import RunNotActive, RunNotFound
from backend.services.workflows import InvalidInput, PublishRejected, WorkflowNotFound

log = logging.getLogger(__name__)


def _json(status: int, detail: str, **extra: object) -> Response[bytes]:
    body = msgspec.json.encode(ErrorOut(status_code=status, detail=detail, **extra))  # type: ignore[arg-type]
    return Response(body, status_code=status, media_type=MediaType.JSON)


def not_found(_: Request, exc: LookupError) -> Response[bytes]:
    return _json(404, str(exc).strip("'\""))


def invalid_input(_: Request, exc: InvalidInput) -> Response[bytes]:
    return _json(400, str(exc), field=exc.field)


def conflict(_: Request, exc: Exception) -> Response[bytes]:
    return _json(409, str(exc))


def publish_rejected(_: Request, exc: PublishRejected) -> Response[bytes]:
    return _json(422, str(exc), diagnostics=exc.diagnostics)


def database_unavailable(_: Request, exc: Exception) -> Response[bytes]:
    log.warning("database unavailable: %s", exc)
    return _json(503, "database unavailable, try again shortly")


def internal_error(request: Request, exc: Exception) -> Response[bytes]:
    if isinstance(exc, HTTPException):
        return _json(exc.status_code, exc.detail, **({}))
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _json(500, "internal error (logged)")


API_EXCEPTION_HANDLERS = {
    WorkflowNotFound: not_found,
    RunNotFound: not_found,
    RunNotActive: conflict,
    InvalidInput: invalid_input,
    PublishRejected: publish_rejected,
}
