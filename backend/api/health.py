"""Liveness and readiness probes (no login)."""

from __future__ import annotations

from litestar import Controller, Request, Response, get
from sqlalchemy import text

from backend.auth.policy import Permission
from backend.runtime import Runtime


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
        """200 when the database and Redis answer, else 503 naming what is down."""
        runtime: Runtime = request.app.state.runtime
        result = {"database": "ok", "redis": "ok"}
        try:
            async with runtime.engine.connect() as conn:
                await conn.execute(text("select 1"))
        except Exception as exc:
            result["database"] = f"down: {type(exc).__name__}"
        try:
            await runtime.redis.ping()
        except Exception as exc:
            result["redis"] = f"down: {type(exc).__name__}"
        ok = all(v == "ok" for v in result.values())
        return Response(result, status_code=200 if ok else 503)
