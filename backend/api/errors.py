"""Exception handlers: domain errors become clear JSON errors, never a stack trace."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.params import CookieParameter, HeaderParameter, QueryParameter

from backend import problems
from backend.api.malformed_ids import malformed_id
from backend.api.versioning import requested_path
from backend.services.availability import unavailable_service
from backend.services.errors import InvalidInput
from backend.services.identity.accounts import AccountError
from backend.services.identity.api_tokens import TokenError
from backend.services.identity.grants import GrantError, GrantNotFound
from backend.services.identity.groups import GroupNotFound
from backend.services.identity.naming import InvalidName, NameTaken
from backend.services.identity.password_links import InvalidLink
from backend.services.identity.passwords import WeakPassword
from backend.services.identity.references import ReferenceNotGranted
from backend.services.paging import BadCursor
from backend.services.runs.execution import RunNotActive, RunNotFound
from backend.services.runs.storable import UnstorableInput, refused_by_database
from backend.services.search.search import SearchInputError
from backend.services.subscriptions.manage import SubscriptionError, SubscriptionNotFound
from backend.services.triggers.events.samples import SampleFailed
from backend.services.workflows.projects import ProjectNotFound
from backend.services.workflows.workflow_lifecycle import CreateNotAllowed
from backend.services.workflows.workflows import (
    DraftConflict,
    PublishRejected,
    WorkflowArchived,
    WorkflowInUse,
    WorkflowNotFound,
    WorkflowNotPublished,
)

log = logging.getLogger(__name__)


def problem_response(request: Request, status: int, detail: str, **kwargs: Any) -> Response[bytes]:
    """A problem details answer (:mod:`backend.problems`) for the path ``request`` was
    sent to (an unversioned alias's own, not the ``/api/v1`` path it is routed as);
    ``kwargs`` as :func:`backend.problems.problem` takes them."""
    body = problems.body(status, detail, requested_path(request.scope), **kwargs)
    return Response(body, status_code=status, media_type=problems.MEDIA_TYPE)


_json = problem_response


def not_found(request: Request, exc: LookupError) -> Response[bytes]:
    return _json(request, 404, str(exc).strip("'\""))


def invalid_input(request: Request, exc: InvalidInput | UnstorableInput) -> Response[bytes]:
    return _json(request, 400, str(exc), field=exc.field)


def sample_failed(request: Request, exc: SampleFailed) -> Response[bytes]:
    """A test event that could not be fetched: its status, the message, the field when
    the request is at fault, ``kind`` the connector's error kind."""
    return _json(request, exc.status, exc.message, field=exc.field, kind=exc.kind)


def bad_cursor(request: Request, exc: BadCursor) -> Response[bytes]:
    """400 naming the ``cursor`` parameter of a list (not a cursor this list handed out)."""
    return _json(request, 400, str(exc), field=exc.field, where="parameter")


def search_input(request: Request, exc: SearchInputError) -> Response[bytes]:
    """400 naming the search parameter (``q``, ``cursor``, ...) and, for the query, the
    0-based ``position`` of the fault."""
    extra = {"position": exc.position} if exc.position is not None else {}
    return _json(request, 400, str(exc), field=exc.field, where="parameter", **extra)


def reference_not_granted(request: Request, exc: ReferenceNotGranted) -> Response[bytes]:
    """403 naming the node and config field (``field`` is ``<node id>.<field>``)."""
    return _json(request, 403, str(exc), field=f"{exc.node_id}.{exc.field}")


def bad_field(
    request: Request, exc: TokenError | GrantError | InvalidName | SubscriptionError
) -> Response[bytes]:
    """400 naming the field of invalid access-control input (tokens, grants, names)."""
    return _json(request, 400, str(exc), field=exc.field)


_AT = re.compile(r" - at `\$\.?([^`]*)`")
_UNKNOWN = re.compile(r"^Object contains unknown field `([^`]*)`")


def validation_error(request: Request, exc: ValidationException) -> Response[bytes]:
    """400 for a request Litestar's validation refused: ``detail`` says what, ``errors``
    where, one finding per problem (a ``pointer`` into the body, ``#/nodes/0/id``, or the
    ``parameter`` named), ``field`` the first one's place."""
    extra = exc.extra if isinstance(exc.extra, list) else []
    findings: list[problems.ProblemError] = []
    message = exc.detail
    for number, item in enumerate(extra):
        if not isinstance(item, dict):
            continue
        text = str(item.get("message") or "")
        found = _AT.search(text)
        key = str(item.get("key") or "")
        # the body's own kwarg name (``data``) is no place inside the body
        place = (found.group(1) if found else "") or ("" if key == "data" else key)
        unknown = _UNKNOWN.match(text)
        if unknown:
            place = ".".join(p for p in (place, unknown.group(1)) if p)
        said = _AT.sub("", text) or exc.detail
        if key == "data" and text == "'data'":  # Litestar's words for a missing body
            said = "the request needs a JSON body"
        source = getattr(item.get("source"), "value", item.get("source"))
        if source in (None, "body"):
            findings.append(problems.ProblemError(said, pointer=problems.pointer(place)))
        else:
            place = _http_name(request, place, str(source))
            findings.append(problems.ProblemError(said, parameter=place or None))
        where = place
        if number == 0 and text:
            message = f"{where}: {said}" if where else said
    return _json(request, 400, message, errors=findings)


def _http_name(request: Request, key: str, source: str) -> str:
    """The name a request parameter has on the wire (``Idempotency-Key``) for the handler
    argument ``key`` (``idempotency_key``) Litestar's validation names, when the handler
    declares one for ``source`` (``header``, ``query``, ``cookie``); else ``key``."""
    handler = request.scope.get("route_handler")
    signature = getattr(handler, "parsed_fn_signature", None)
    field = signature.parameters.get(key) if signature is not None else None
    kwarg = getattr(field, "kwarg_definition", None)
    # Parameter(header=...) / Parameter(query=...), or HeaderParameter(name=...) (and
    # QueryParameter, CookieParameter: ``in`` for the argument ``search_in``)
    named = (HeaderParameter, QueryParameter, CookieParameter)
    declared = getattr(kwarg, source, None) or (kwarg.name if isinstance(kwarg, named) else None)
    return declared if isinstance(declared, str) and declared else key


def too_deep(request: Request, _: RecursionError) -> Response[bytes]:
    """400 for a body nested deeper than the decoder can follow (thousands of levels):
    far past every depth limit, which a decodable body is checked against afterwards. The
    decoder gave up before reaching a field, so the field named is the whole ``body``."""
    limit = request.app.state.runtime.settings.max_json_depth
    return _json(
        request,
        400,
        f"the request body is nested too deeply (limit max_json_depth: {limit} levels; "
        "node configs: max_config_depth)",
        field="body",
    )


def name_taken(request: Request, exc: NameTaken) -> Response[bytes]:
    """409 naming the field whose value another object already uses."""
    return _json(request, 409, str(exc), field=exc.field)


def forbidden(request: Request, exc: Exception) -> Response[bytes]:
    return _json(request, 403, str(exc))


def conflict(request: Request, exc: Exception) -> Response[bytes]:
    return _json(request, 409, str(exc), type=problems.STATE_CONFLICT)


def account_error(request: Request, exc: AccountError) -> Response[bytes]:
    return _json(request, exc.status, str(exc), field=exc.field)


def weak_password(request: Request, exc: WeakPassword) -> Response[bytes]:
    return _json(request, 400, f"password: {exc}", field="password")


def invalid_link(request: Request, exc: InvalidLink) -> Response[bytes]:
    return _json(request, 410, str(exc))


def draft_conflict(request: Request, exc: DraftConflict) -> Response[bytes]:
    """409 naming who saved the draft revision the refused save did not know about."""
    return _json(
        request,
        409,
        str(exc),
        type=problems.DRAFT_CONFLICT,
        revision=exc.revision,
        saved_by=exc.saved_by,
        saved_at=exc.saved_at,
    )


def publish_rejected(request: Request, exc: PublishRejected) -> Response[bytes]:
    return _json(
        request, 422, str(exc), type=problems.PUBLISH_REJECTED, diagnostics=exc.diagnostics
    )


def http_error(request: Request, exc: HTTPException) -> Response[bytes]:
    """Litestar's own refusals (401 from the guard, 403 CSRF, 404 no route, 405 with
    ``Allow``, 413, ...) and ``HTTPException`` raised by handlers, as problem details;
    the exception's headers are kept. A path no route matches only because an id in it
    is malformed (``/api/v1/runs/not-a-uuid``) is a 400 naming that parameter."""
    if exc.status_code == 404 and request.scope.get("route_handler") is None:
        found = malformed_id(request.app, request.url.path)
        if found is not None:
            name, segment, kind = found
            said = f"{name}: {segment!r} is not a valid {kind}"
            return _json(request, 400, said, field=name, where="parameter")
    detail = str(exc.detail)
    if exc.status_code == 400 and detail.startswith(_UNREADABLE_BODY):
        # the decoder's message says where (the byte); the finding points at the body
        finding = problems.ProblemError(detail, pointer=problems.pointer(""))
        return _json(request, 400, detail, errors=[finding])
    named = exc.extra.get("parameter") if isinstance(exc.extra, dict) else None
    if isinstance(named, str):  # e.g. a 415 names the Content-Type header
        response = _json(request, exc.status_code, detail, field=named, where="parameter")
    else:
        response = _json(request, exc.status_code, detail)
    response.headers.update(exc.headers or {})
    if exc.status_code == 401 and "www-authenticate" not in {k.lower() for k in response.headers}:
        # RFC 9110 section 11.6.1: a 401 names the scheme to authenticate with (an API token)
        response.headers["WWW-Authenticate"] = 'Bearer realm="railyard"'
    return response


_UNREADABLE_BODY = ("JSON is malformed", "Input data was truncated")
"""How msgspec's decoder (Litestar's, for a JSON body) begins a body it cannot read."""


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
    without one. An ``HTTPException`` raised as 500 is answered as it says (:func:`http_error`).
    """
    if isinstance(exc, HTTPException):
        return http_error(request, exc)
    if refused_by_database(exc):  # missed by StorableInputMiddleware (e.g. a huge body)
        log.warning("unstorable text on %s %s: %s", request.method, request.url.path, exc)
        return _json(
            request,
            400,
            "a value contains U+0000 (NUL) or a lone surrogate, which cannot be stored",
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
        response = _json(request, 503, UNAVAILABLE_DETAIL[service], type=problems.UNAVAILABLE)
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _json(request, 500, "internal error (logged)")


ErrorHandler = Callable[[Request[Any, Any, Any], Any], Response[Any]]

API_EXCEPTION_HANDLERS: dict[int | type[Exception], ErrorHandler] = {
    WorkflowNotFound: not_found,
    RunNotFound: not_found,
    RunNotActive: conflict,
    WorkflowInUse: conflict,
    WorkflowArchived: conflict,
    WorkflowNotPublished: conflict,
    InvalidInput: invalid_input,
    SearchInputError: search_input,
    BadCursor: bad_cursor,
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
    SubscriptionNotFound: not_found,
    SubscriptionError: bad_field,
    500: unexpected_error,
    DraftConflict: draft_conflict,
    SampleFailed: sample_failed,
}
