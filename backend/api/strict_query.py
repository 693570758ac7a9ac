"""Unknown query parameters are refused: a typo (``?stauts=failed``) is a 400 naming it,
never a silently ignored filter (docs/api.md, "Requests").

:func:`install` walks the app's routes once at build time and records on each API handler
(``opt[ALLOWED]``) the query parameters it declares, its dependencies' included (Litestar's
own kwargs model of the route, so an alias such as ``from`` counts by the name callers
send). :func:`refuse_unknown_query`, a guard run after the permission guard, answers a
request naming any other parameter with a 400 listing each one (problem details, one
``errors`` entry per parameter).

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
            names = frozenset(p.field_alias for p in model.expected_query_params)
            handler.opt[ALLOWED] = names | handler.opt.get(ALLOWED, frozenset())


def refuse_unknown_query(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Guard: raise ``ValidationException`` (400) naming each query parameter ``handler``
    does not declare (``extra``: ``[{"message", "key", "source": "query"}]``)."""
    allowed = handler.opt.get(ALLOWED)
    if allowed is None:
        return
    unknown = sorted(set(connection.query_params) - allowed)
    if not unknown:
        return
    known = ", ".join(sorted(allowed)) or "none"
    raise ValidationException(
        detail=f"unknown query parameter {', '.join(unknown)} (accepted: {known})",
        extra=[
            {
                "message": f"unknown query parameter (accepted: {known})",
                "key": name,
                "source": "query",
            }
            for name in unknown
        ],
    )
