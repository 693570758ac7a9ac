"""``/admin/dashboard``: the operations dashboard (needs ``metrics:read``).

Server-rendered SVG charts (frontend/charts.py): runs ended per minute by outcome, success
rate, p50/p95/p99 run duration, slowest and most-failing workflows, queue depth, oldest
due job, ready steps, live workers, and what retention removed. Every chart and row links
to the matching search (:func:`search_link`). ``?window=`` picks the period in
minutes (15, 60, 360, 1440, 10080). Connectors that failed to load are listed at the top
(with the reasons for admins; backend/services/connectors/catalog.py), so a broken plugin is seen
where operations are watched, not only in a log.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from functools import partial
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get
from litestar.params import FromQuery

from backend.auth.policy import Permission
from backend.services.operations import dashboard
from backend.web.authentication import AppRuntime
from backend.web.guards import CurrentPrincipal
from frontend import charts
from frontend.pages import LoginRequiredPages, render

WINDOW_LABELS = {15: "15 min", 60: "1 hour", 360: "6 hours", 1440: "24 hours", 10080: "7 days"}


STATUSES = {
    None: "succeeded,failed,cancelled,timed_out",
    "failed": ",".join(dashboard.FAILED),
    "other": "cancelled",
}
"""The ``status:`` values of a chart mark (None: every ended run; "failed": failed or timed
out, as the dashboard counts them; "other": cancelled)."""


def search_link(
    status: str | None = None,
    workflow_id: uuid.UUID | None = None,
    *,
    minutes: int | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    sort: str | None = None,
) -> str:
    """The search (docs/search.md) behind a chart mark: ``/search?q=status:failed,timed_out
    workflow:<id> since:60m``.

    ``status``: a run status or a key of :data:`STATUSES`; ``workflow_id``: one workflow
    (by id: names need not be unique); the time is ``after:``/``before:`` of a bucket
    (``start``, ``end``: UTC, minute precision) or ``since:<minutes>m`` of the window.
    Search times are run creation while the dashboard counts runs by end, so a run that
    started before the window and ended in it is counted but not listed. Runs still running
    are listed whenever they started (no time). ``sort``: a run sort (``duration``: the
    longest first, for the duration charts).
    """
    terms = [f"status:{STATUSES.get(status, status)}"]
    if workflow_id is not None:
        terms.append(f"workflow:{workflow_id}")
    if status != "running":
        if start is not None and end is not None:
            terms += [f"after:{start:%Y-%m-%dT%H:%M}", f"before:{end:%Y-%m-%dT%H:%M}"]
        elif minutes:
            terms.append(f"since:{minutes}m")
    if sort:
        terms.append(f"sort:{sort}")
    return "/search?" + urlencode({"q": " ".join(terms)})


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
        principal: CurrentPrincipal,
        window: FromQuery[str | None] = None,
    ) -> Response[str]:
        """The dashboard over the last ``window`` minutes (default 60)."""
        load_errors = runtime.catalog.errors
        minutes = dashboard.parse_window(window)
        board = await dashboard.load(runtime.sessionmaker, runtime.redis, minutes=minutes)
        return render(
            request,
            "dashboard.html",
            board=board,
            windows=WINDOW_LABELS,
            runs_chart=charts.runs_chart(board.per_bucket, board.bucket_minutes, search_link),
            success_ring=charts.ring(board.success_rate, "Success rate"),
            percentile_bars=charts.hbars([(k, v) for k, v in board.percentiles.items()]),
            meter=charts.meter,
            duration=charts.duration,
            search_link=partial(search_link, minutes=minutes),
            load_errors=load_errors if principal.is_admin else [],
            load_error_count=len(load_errors),
        )
