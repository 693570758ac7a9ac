"""JSON bodies come as JSON: an operation that takes a JSON body refuses one sent with
another media type (``text/plain``, a form, none at all) with 415 Unsupported Media Type
(RFC 9110 section 15.5.16), problem details naming the ``Content-Type`` header, instead
of decoding it as JSON whatever it says it is (docs/api.md, "Requests").

:func:`install` marks, once at build time, every ``/api`` handler whose body (its
``data`` argument) is JSON (``opt[JSON_BODY]``); :func:`refuse_non_json_body`, a guard
run after the permission and query guards, refuses a request to such a handler that
carries a body whose ``Content-Type`` is neither ``application/json`` nor a ``+json``
structured syntax suffix type (RFC 6839 section 3.1, e.g. ``application/merge-patch+json``),
parameters such as ``charset`` aside. A request without a body is left to the
operation (a missing required body is its 400).
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.enums import RequestEncodingType
from litestar.exceptions import HTTPException
from litestar.handlers import BaseRouteHandler
from litestar.params import BodyKwarg
from litestar.routes import HTTPRoute

JSON_BODY = "json_body"
"""Key of a handler's ``opt``: true when its request body is JSON."""

UNSUPPORTED_MEDIA_TYPE = 415

CONTENT_TYPE = "Content-Type"

API_PREFIX = "/api/"


def install(app: Litestar) -> None:
    """Mark every ``/api`` handler of ``app`` whose ``data`` argument is a JSON body."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or not route.path.startswith(API_PREFIX):
            continue
        for handler in route.route_handlers:
            data = handler.parsed_fn_signature.parameters.get("data")
            if data is None:
                continue
            kwarg = data.kwarg_definition
            media = kwarg.media_type if isinstance(kwarg, BodyKwarg) else RequestEncodingType.JSON
            if media == RequestEncodingType.JSON:
                handler.opt[JSON_BODY] = True


def is_json(content_type: str) -> bool:
    """True for ``application/json`` and ``+json`` types (``application/merge-patch+json``),
    whatever their parameters (``; charset=utf-8``)."""
    essence = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = essence.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _has_body(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    headers = connection.headers
    length = headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in headers


def refuse_non_json_body(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Guard: raise a 415 ``HTTPException`` for a body of a JSON-taking ``handler`` sent
    with another (or no) ``Content-Type`` (``extra``: the header's name, for the problem's
    finding); a POST's answer says what is taken in ``Accept-Post``, a PATCH's in
    ``Accept-Patch`` (RFC 5789 section 3.1)."""
    if not handler.opt.get(JSON_BODY) or not _has_body(connection):
        return
    given = connection.headers.get("content-type", "")
    if is_json(given):
        return
    said = f"Content-Type {given!r}" if given else "no Content-Type"
    method = str(connection.scope.get("method", ""))
    accept = {"POST": "Accept-Post", "PATCH": "Accept-Patch"}.get(method)
    raise HTTPException(
        status_code=UNSUPPORTED_MEDIA_TYPE,
        detail=f"the body must be JSON sent as Content-Type: application/json ({said} given)",
        headers={accept: "application/json"} if accept else None,
        extra={"parameter": CONTENT_TYPE},
    )
