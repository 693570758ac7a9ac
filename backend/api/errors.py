"""Exception handlers: domain errors become clear JSON errors, never a stack trace."""

from __future__ import annotations

import logging
import re

import asyncpg
import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

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


_AT = re.compile(r" - at `\$\.?([^`]*)`")
_UNKNOWN = re.compile(r"^Object contains unknown field `([^`]*)`")


def validation_error(_: Request, exc: ValidationException) -> Response[bytes]:
    """400 for a request Litestar's validation refused: ``detail`` says what, ``field``
    where (the parameter or the body's field path, ``nodes[0].id``), ``extra`` all findings."""
    extra = exc.extra if isinstance(exc.extra, list) else []
    field = None
    message = exc.detail
    if extra and isinstance(extra[0], dict):
        first = extra[0]
        text = str(first.get("message") or "")
        found = _AT.search(text)
        field = str((found.group(1) if found else "") or first.get("key") or "") or None
        unknown = _UNKNOWN.match(text)
        if unknown:
            field = ".".join(p for p in (field, unknown.group(1)) if p)
        if text:
            message = _AT.sub("", text)
            if field:
                message = f"{field}: {message}"
    return _json(400, message, field=field, extra=extra or None)


def too_deep(request: Request, _: RecursionError) -> Response[bytes]:
    """400 for a body nested deeper than the decoder can follow (thousands of levels):
    far past every depth limit, which a decodable body is checked against afterwards."""
    limit = request.app.state.runtime.settings.max_json_depth
    return _json(
        400,
        f"the request body is nested too deeply (limit max_json_depth: {limit} levels; "
        "node configs: max_config_depth)",
    )


def conflict(_: Request, exc: Exception) -> Response[bytes]:
    return _json(409, str(exc))


def publish_rejected(_: Request, exc: PublishRejected) -> Response[bytes]:
    return _json(422, str(exc), diagnostics=exc.diagnostics)


def database_unavailable(_: Request, exc: Exception) -> Response[bytes]:
    log.warning("database unavailable: %s: %s", type(exc).__name__, exc)
    return _json(503, "database unavailable, try again shortly")


def service_unavailable(request: Request, exc: Exception) -> Response[bytes]:
    """503 for a lost connection (``OSError`` and its ``ConnectionError`` family, Redis
    connection errors); any other error stays a 500."""
    if isinstance(exc, OSError | RedisConnectionError):
        return database_unavailable(request, exc)
    return internal_error(request, exc)


def database_error(request: Request, exc: DBAPIError) -> Response[bytes]:
    """503 when a SQLAlchemy DBAPI error means the connection is gone (``OperationalError``,
    ``InterfaceError``, an invalidated connection, or a wrapped connection error); any other
    (an integrity or data error: a bug) stays a 500."""
    if (
        isinstance(exc, OperationalError | InterfaceError)
        or exc.connection_invalidated
        or isinstance(exc.orig, DATABASE_UNAVAILABLE_ERRORS)
        or isinstance(exc.orig, OSError)
        or "connection" in type(exc.orig).__name__.lower()
    ):
        return database_unavailable(request, exc)
    return internal_error(request, exc)


DATABASE_UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.exceptions.CannotConnectNowError,  # the server is starting or shutting down
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.PostgresConnectionError,
    ConnectionRefusedError,
    ConnectionResetError,
    TimeoutError,  # pool checkout or connect timeout
)
"""Errors that mean "PostgreSQL cannot be reached right now": the API answers 503."""


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
    ValidationException: validation_error,
    RecursionError: too_deep,
    PublishRejected: publish_rejected,
    **dict.fromkeys(DATABASE_UNAVAILABLE_ERRORS, database_unavailable),
    DBAPIError: database_error,
    OSError: service_unavailable,
    RedisConnectionError: service_unavailable,
}
