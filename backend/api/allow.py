"""``Allow`` headers that list exactly the methods a path supports.

Litestar adds an ``OPTIONS`` handler to each route when the route is first built; when a
later handler joins the same path (a controller's ``GET /`` after its ``POST /``), the route
is rebuilt but keeps the first ``OPTIONS`` handler, whose ``Allow`` still lists only the
methods known then. :func:`correct_options_allow` points every such handler at its final
route. (405 answers take ``Allow`` from the router and are right; ``backend.app`` passes it
through its error handler.)
"""

from __future__ import annotations

from litestar import Litestar
from litestar.routes import HTTPRoute


def correct_options_allow(app: Litestar) -> None:
    """Make each generated ``OPTIONS`` handler of ``app`` answer its route's methods."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if handler.http_methods == {"OPTIONS"} and handler.fn.__name__ == "options_handler":
                handler._fn = route.create_options_handler(route.path).fn
