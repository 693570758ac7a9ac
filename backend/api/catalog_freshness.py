"""Before a request: this API process's catalog holds the connectors other processes
imported (:class:`backend.services.connectors.openapi_catalog.CatalogWatch`, one Redis ``GET``).

Health checks, metrics, static files and webhook deliveries do not read imported
connectors and skip the check, so a probe never waits on Redis.
"""

from __future__ import annotations

from typing import Any

from litestar import Request

SKIPPED = ("/health", "/metrics", "/static", "/hooks")


async def current_catalog(request: Request[Any, Any, Any]) -> None:
    """Litestar ``before_request`` hook; returns ``None`` so the handler runs."""
    if request.url.path.startswith(SKIPPED):
        return
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None:
        await runtime.catalog_watch.check()
