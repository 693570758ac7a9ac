"""``GET /metrics``: this process's Prometheus metrics plus the installation gauges.

Needs ``metrics:read`` (admins, or an admin's API token) or, when
``RAILYARD_METRICS_TOKEN`` is set, ``Authorization: Bearer <that token>`` (what a
Prometheus scrape job sends: ``authorization: {credentials: ...}``). The series are listed
in docs/operations.md ("Metrics") and :mod:`backend.observability.metrics`.
"""

from __future__ import annotations

from litestar import Controller, Response, get

from backend.auth.policy import Permission
from backend.observability import metrics
from backend.services.operations.metrics_view import refresh_gauges
from backend.web.authentication import AppRuntime, user_dependencies


class MetricsController(Controller):
    """The Prometheus scrape endpoint of the API process."""

    path = "/metrics"
    tags = ["operations"]
    dependencies = user_dependencies()

    @get(
        "/",
        operation_id="metrics",
        media_type=metrics.CONTENT_TYPE,
        opt={"permission": Permission.METRICS_READ},
    )
    async def scrape(self, runtime: AppRuntime) -> Response[bytes]:
        """The Prometheus text exposition (format 0.0.4) of this process, with queue depth,
        oldest due job, ready steps and live workers read at this moment."""
        await refresh_gauges(runtime.sessionmaker, runtime.redis)
        return Response(metrics.exposition(installation=True), media_type=metrics.CONTENT_TYPE)
