"""Unknown and repeated query parameters are refused: a typo (``?stauts=failed``) is a 400
naming it, never a silently ignored filter, and so is a parameter that takes one value
given twice (``?limit=5&limit=7``), never the last one silently winning (docs/api.md,
"Requests").

:func:`install` walks the app's routes once at build time and records on each API handler
(``opt[ALLOWED]``) the query parameters it declares, its dependencies' included (Litestar's
own kwargs model of the route, so an alias such as ``from`` counts by the name callers
send), and (``opt[SINGLE]``) those of them that take one value (not a list).
:func:`refuse_unknown_query`, a guard run after the permission guard, answers a request
naming any other parameter, or repeating a single-valued one, with a 400 listing each one
(problem details, one ``errors`` entry per parameter).

Only ``/api`` routes are held to it: webhooks take whatever query a sender adds, pages
keep their own forms, and the OAuth2 callback (operation ``oauth2_callback``) receives
whatever the provider appends (RFC 6749 section 4.1.2 lets it add parameters).
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.exceptions import ValidationException
from litestar.handlers import BaseRouteHandler
from litestar.routes import HTTPRoute

ALLOWED = "query_parameters"
"""Key of a handler's ``opt``: the frozenset of query parameter names it accepts."""

SINGLE = "single_query_parameters"
"""Key of a handler's ``opt``: the frozenset of its query parameters that take one value."""

OPEN_QUERY = frozenset({"oauth2_callback"})
"""Operations that accept any query parameter (see the module doc)."""

API_PREFIX = "/api/"


def install(app: Litestar) -> None:
    """Record the accepted query parameters of every ``/api`` handler of ``app``."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or not route.path.startswith(API_PREFIX):
            continue
        for handler, model in route.route_handler_map.values():
            if handler.operation_id in OPEN_QUERY:
                continue
            params = model.expected_query_params
            names = frozenset(p.field_alias for p in params)
            handler.opt[ALLOWED] = names | handler.opt.get(ALLOWED, frozenset())
            single = frozenset(p.field_alias for p in params if not p.is_sequence)
            handler.opt[SINGLE] = single | handler.opt.get(SINGLE, frozenset())


def refuse_unknown_query(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Guard: raise ``ValidationException`` (400) naming each query parameter ``handler``
    does not declare, and each single-valued one the request repeats (``extra``:
    ``[{"message", "key", "source": "query"}]``, unknown ones first)."""
    allowed = handler.opt.get(ALLOWED)
    if allowed is None:
        return
    query = connection.query_params
    unknown = sorted(set(query) - allowed)
    single = handler.opt.get(SINGLE, frozenset())
    repeated = sorted(n for n in set(query) & single if len(query.getall(n)) > 1)
    if not unknown and not repeated:
        return
    known = ", ".join(sorted(allowed)) or "none"
    extra = [
        {"message": f"unknown query parameter (accepted: {known})", "key": n, "source": "query"}
        for n in unknown
    ]
    extra += [
        {
            "message": f"given {len(query.getall(n))} times; it takes one value",
            "key": n,
            "source": "query",
        }
        for n in repeated
    ]
    if unknown:
        detail = f"unknown query parameter {', '.join(unknown)} (accepted: {known})"
    else:
        detail = f"{repeated[0]}: given {len(query.getall(repeated[0]))} times; it takes one value"
    raise ValidationException(detail=detail, extra=extra)
