"""A malformed id in an API path is a 400 naming the parameter, not a 404.

Litestar routes ``/api/v1/runs/{run_id:uuid}`` only for a path segment that parses as a
UUID, so ``/api/v1/runs/not-a-uuid`` matches no route and would answer 404, as if the run
did not exist. :func:`install` keeps, for every ``/api`` route with typed path
parameters, a pattern matching any segment in their place; :func:`malformed_id` is asked
when routing found nothing and names the first parameter whose segment does not parse
(``run_id`` and ``"not-a-uuid"``), which the error handler answers as a 400.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

from litestar import Litestar
from litestar.routes import HTTPRoute

_PARAM = re.compile(r"\{(\w+):(\w+)\}")

PARSERS: dict[str, Callable[[str], Any]] = {"uuid": uuid.UUID, "int": int}
"""Path parameter types checked, and how a segment is parsed as each."""

_PATTERNS = "malformed_id_patterns"


def install(app: Litestar) -> None:
    """Keep on ``app.state`` the patterns of its ``/api`` routes with typed parameters."""
    patterns: list[tuple[re.Pattern[str], list[tuple[str, str]]]] = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute) or not route.path.startswith("/api/"):
            continue
        params = [(n, t) for n, t in _PARAM.findall(route.path) if t in PARSERS]
        if not params:
            continue
        regex = ""
        for part in re.split(r"(\{\w+:\w+\})", route.path):
            found = _PARAM.fullmatch(part)
            regex += f"(?P<{found.group(1)}>[^/]+)" if found else re.escape(part)
        patterns.append((re.compile(regex + "/?"), params))
    app.state[_PATTERNS] = patterns


def malformed_id(app: Litestar, path: str) -> tuple[str, str, str] | None:
    """``(parameter, segment, type)`` of the first typed path parameter of an ``/api``
    route that ``path`` would match but for that segment; ``None`` when there is none."""
    for regex, params in app.state.get(_PATTERNS, ()):
        matched = regex.fullmatch(path)
        if matched is None:
            continue
        for name, kind in params:
            segment = matched.group(name)
            try:
                PARSERS[kind](segment)
            except ValueError:
                return name, segment, kind
    return None
