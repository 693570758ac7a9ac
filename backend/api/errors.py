"""Exception handlers: domain errors become clear JSON errors, never a stack trace."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import msgspec
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.exceptions.responses import create_exception_response

from backend.api.schemas import DraftConflictOut, ErrorOut
from backend.services.accounts import AccountError
from backend.services.api_tokens import TokenError
from backend.services.availability import unavailable_service
from backend.services.events.samples import SampleFailed
from backend.services.execution import RunNotActive, RunNotFound
from backend.services.grants import GrantError, GrantNotFound
from backend.services.groups import GroupNotFound
from backend.services.naming import InvalidName, NameTaken
from backend.services.password_links import InvalidLink
from backend.services.passwords import WeakPassword
from backend.services.projects import ProjectNotFound
from backend.services.references import ReferenceNotGranted
from backend.services.search import SearchInputError
from backend.services.storable import UnstorableInput, refused_by_database
from backend.services.workflow_lifecycle import CreateNotAllowed
from backend.services.workflows import (
    DraftConflict,
    InvalidInput,
    PublishRejected,
    WorkflowArchived,
    WorkflowInUse,
    WorkflowNotFound,
)

log = logging.getLogger(__name__)


def _json(status: int, detail: str, **extra: object) -> Response[bytes]:
    body = msgspec.json.encode(ErrorOut(status_code=status, detail=detail, **extra))  # type: ignore[arg-type]
    return Response(body, status_code=status, media_type=MediaType.JSON)


def not_found(_: Request, exc: LookupError) -> Response[bytes]:
    return _json(404, str(exc).strip("'\""))


def invalid_input(_: Request, exc: InvalidInput | UnstorableInput) -> Response[bytes]:
    return _json(400, str(exc), field=exc.field)


def sample_failed(_: Request, exc: SampleFailed) -> Response[bytes]:
    """A test event that could not be fetched: its status, the message, ``field`` when
    the request is at fault, ``extra.kind`` the connector's error kind."""
    return _json(exc.status, exc.message, field=exc.field, extra={"kind": exc.kind})


def search_input(_: Request, exc: SearchInputError) -> Response[bytes]:
    """400 naming the search parameter (``q``, ``cursor``, ...) and, for the query, the
    0-based ``position`` of the fault (``extra.position``)."""
    extra = {"position": exc.position} if exc.position is not None else None
    return _json(400, str(exc), field=exc.field, extra=extra)


def reference_not_granted(_: Request, exc: ReferenceNotGranted) -> Response[bytes]:
    """403 naming the node and config field (``field`` is ``<node id>.<field>``)."""
    return _json(403, str(exc), field=f"{exc.node_id}.{exc.field}")


def bad_field(_: Request, exc: TokenError | GrantError | InvalidName) -> Response[bytes]:
    """400 naming the field of invalid access-control input (tokens, grants, names)."""
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
    far past every depth limit, which a decodable body is checked against afterwards. The
    decoder gave up before reaching a field, so the field named is the whole ``body``."""
    limit = request.app.state.runtime.settings.max_json_depth
    return _json(
        400,
        f"the request body is nested too deeply (limit max_json_depth: {limit} levels; "
        "node configs: max_config_depth)",
        field="body",
    )


def name_taken(_: Request, exc: NameTaken) -> Response[bytes]:
    """409 naming the field whose value another object already uses."""
    return _json(409, str(exc), field=exc.field)


def forbidden(_: Request, exc: Exception) -> Response[bytes]:
    return _json(403, str(exc))


def conflict(_: Request, exc: Exception) -> Response[bytes]:
    return _json(409, str(exc))


def account_error(_: Request, exc: AccountError) -> Response[bytes]:
    return _json(exc.status, str(exc), field=exc.field)


def weak_password(_: Request, exc: WeakPassword) -> Response[bytes]:
    return _json(400, f"password: {exc}", field="password")


def invalid_link(_: Request, exc: InvalidLink) -> Response[bytes]:
    return _json(410, str(exc))


def draft_conflict(_: Request, exc: DraftConflict) -> Response[bytes]:
    """409 naming who saved the draft revision the refused save did not know about."""
    body = msgspec.json.encode(
        DraftConflictOut(409, str(exc), exc.revision, exc.saved_by, exc.saved_at)
    )
    return Response(body, status_code=409, media_type=MediaType.JSON)


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
    WorkflowInUse: conflict,
    WorkflowArchived: conflict,
    InvalidInput: invalid_input,
    SearchInputError: search_input,
    ValidationException: validation_error,
    RecursionError: too_deep,
    UnstorableInput: invalid_input,
    PublishRejected: publish_rejected,
    AccountError: account_error,
    WeakPassword: weak_password,
    InvalidLink: invalid_link,
    ReferenceNotGranted: reference_not_granted,
    CreateNotAllowed: forbidden,
    TokenError: bad_field,
    GrantError: bad_field,
    InvalidName: bad_field,
    NameTaken: name_taken,
    GrantNotFound: not_found,
    GroupNotFound: not_found,
    ProjectNotFound: not_found,
    500: unexpected_error,
    DraftConflict: draft_conflict,
    SampleFailed: sample_failed,
}
