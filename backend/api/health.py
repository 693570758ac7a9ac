"""Liveness and readiness probes (no login)."""

from __future__ import annotations

import asyncio

from litestar import Controller, Request, Response, get

from backend.auth.policy import Permission
from backend.runtime import Runtime
from backend.services.availability import probe_database, probe_redis

DRAINING = "draining"
"""The app-state flag the API process sets when it starts to shut down."""


class HealthController(Controller):
    """``/health``: ``/live`` while the process runs; ``/ready`` checks PostgreSQL and Redis."""

    path = "/health"
    tags = ["health"]

    @get("/live", operation_id="health_live", opt={"permission": Permission.PUBLIC})
    async def live(self) -> dict[str, str]:
        """Always ``{"status": "ok"}``."""
        return {"status": "ok"}

    @get("/ready", operation_id="health_ready", opt={"permission": Permission.PUBLIC})
    async def ready(self, request: Request) -> Response[dict[str, str]]:
        """200 when the database and Redis answer (within 2 s each), else 503 naming what
        is down (``{"database": "down: ConnectionRefusedError", "redis": "ok"}``).

        A process that was asked to stop (SIGTERM) answers 503 with ``"process":
        "draining"`` while it finishes its in-flight requests, so load balancers stop
        sending it new ones (docs/operations.md, "Shutdown and failover")."""
        runtime: Runtime = request.app.state.runtime
        database, redis = await asyncio.gather(
            probe_database(runtime.engine), probe_redis(runtime.redis)
        )
        result = {"database": database, "redis": redis}
        if request.app.state.get(DRAINING, False):
            result["process"] = "draining"
        ok = all(v == "ok" for v in result.values())
        return Response(result, status_code=200 if ok else 503)
