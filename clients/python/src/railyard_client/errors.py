"""Railyard's error answers as exceptions.

Every error answer of the API is an RFC 9457 problem details object (``type``, ``title``,
``status``, ``detail``, ``instance``, ``errors[]``: docs/api.md, "Errors"). The client
raises it as :class:`ProblemError`, or the subclass of its status, so callers catch what
they can handle (``except NotFound``) and read where the fault is (``exc.errors``).
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec


class ProblemItem(msgspec.Struct, kw_only=True):
    """One finding: what is wrong (``detail``) and where, as a JSON Pointer into the body
    (``pointer``, ``#/name``) or the name of a query, path or header ``parameter``."""

    detail: str
    pointer: str | None = None
    parameter: str | None = None


class Problem(msgspec.Struct, kw_only=True):
    """The problem details body (members beyond these are kept in ``ProblemError.body``)."""

    type: str = "about:blank"
    title: str = ""
    status: int = 0
    detail: str = ""
    instance: str = ""
    errors: list[ProblemItem] = msgspec.field(default_factory=list)


class ProblemError(Exception):
    """An error answer of the API.

    ``status`` (HTTP), ``type`` (``about:blank`` or ``urn:railyard:problem:...``),
    ``title``, ``detail``, ``instance`` (the request path), ``errors`` (the findings),
    ``body`` (the whole decoded body, extension members such as ``diagnostics`` of a
    rejected publish included) and ``response`` (the ``httpx.Response``).
    """

    def __init__(self, problem: Problem, body: dict[str, Any], response: httpx.Response) -> None:
        super().__init__(f"{problem.status} {problem.title}: {problem.detail}")
        self.status = problem.status
        self.type = problem.type
        self.title = problem.title
        self.detail = problem.detail
        self.instance = problem.instance
        self.errors = problem.errors
        self.body = body
        self.response = response


class InvalidRequest(ProblemError):
    """400: a parameter or body field missing, malformed, unknown or out of range."""


class Unauthorized(ProblemError):
    """401: no valid token or session."""


class Forbidden(ProblemError):
    """403: the caller may not do this (or the CSRF header is missing)."""


class NotFound(ProblemError):
    """404: no such resource, or one the caller may not read."""


class Conflict(ProblemError):
    """409: not possible in the resource's current state, or a draft moved on."""


class Unprocessable(ProblemError):
    """422: e.g. a publish the diagram's errors refuse (``body["diagnostics"]``)."""


class Unavailable(ProblemError):
    """503: PostgreSQL or Redis cannot be reached right now (retry after
    ``response.headers["Retry-After"]`` seconds)."""


_BY_STATUS: dict[int, type[ProblemError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Unprocessable,
    503: Unavailable,
}


def problem_of(response: httpx.Response) -> ProblemError:
    """The exception for an error ``response`` (any status >= 400). A body that is not
    problem details (a proxy's HTML page) still gives one, from the status alone."""
    try:
        body = msgspec.json.decode(response.content)
        problem = msgspec.convert(body, Problem)
    except (msgspec.DecodeError, msgspec.ValidationError):
        body = {}
        problem = Problem(
            status=response.status_code,
            title=response.reason_phrase,
            detail=response.text[:200],
            instance=response.request.url.path,
        )
    if not isinstance(body, dict):
        body = {}
    kind = _BY_STATUS.get(response.status_code, ProblemError)
    return kind(problem, body, response)
