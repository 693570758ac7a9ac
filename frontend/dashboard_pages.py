"""``/admin/dashboard``: the operations dashboard (needs ``metrics:read``).

Server-rendered SVG charts (frontend/charts.py): runs ended per minute by outcome, success
rate, p50/p95/p99 run duration, slowest and most-failing workflows, queue depth, oldest
due job, ready steps, live workers, and what retention removed. Every chart and row links
to the matching list of runs (:func:`runs_link`). ``?window=`` picks the period in
minutes (15, 60, 360, 1440, 10080).
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get
from litestar.params import FromQuery

from backend.auth.policy import Permission
from backend.auth.web import AppRuntime
from backend.services import dashboard
from frontend import charts
from frontend.pages import LoginRequiredPages, render

WINDOW_LABELS = {15: "15 min", 60: "1 hour", 360: "6 hours", 1440: "24 hours", 10080: "7 days"}


def runs_link(status: str | None = None, workflow_id: uuid.UUID | None = None) -> str:
    """The run list filtered like a chart mark: ``/runs?status=failed&workflow_id=...``.

    One place builds every dashboard link, so pointing them at the search page (its query
    syntax ``status:failed workflow:"Order intake"``) is a change here only.
    """
    query: dict[str, str] = {}
    if workflow_id is not None:
        query["workflow_id"] = str(workflow_id)
    if status:
        query["status"] = status
    return "/runs" + ("?" + urlencode(query) if query else "")


class DashboardPages(LoginRequiredPages):
    """The operations dashboard page."""

    @get(
        "/admin/dashboard",
        operation_id="page_dashboard",
        opt={"permission": Permission.METRICS_READ},
    )
    async def dashboard_page(
        self,
        request: Request[Any, Any, Any],
        runtime: AppRuntime,
        window: FromQuery[str | None] = None,
    ) -> Response[str]:
        """The dashboard over the last ``window`` minutes (default 60)."""
        minutes = dashboard.parse_window(window)
        board = await dashboard.load(runtime.sessionmaker, runtime.redis, minutes=minutes)
        return render(
            request,
            "dashboard.html",
            board=board,
            windows=WINDOW_LABELS,
            runs_chart=charts.runs_chart(board.per_bucket, board.bucket_minutes, runs_link),
            success_ring=charts.ring(board.success_rate, "Success rate"),
            percentile_bars=charts.hbars([(k, v) for k, v in board.percentiles.items()]),
            meter=charts.meter,
            duration=charts.duration,
            runs_link=runs_link,
        )
