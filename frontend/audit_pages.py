"""Admin pages of the audit log and the settings overview (Jinja2 + htmx, login required).

- ``/admin/audit``: filter by actor, action (prefix), object (type and id) and time range;
  newest first, keyset pages ("Older entries" carries the last id shown); each row shows
  actor, time, address, request id, action, object, and the before/after diff.
- ``/admin/audit/export.jsonl``: the same filters, every matching entry as JSON lines,
  streamed (as ``GET /api/admin/audit/export.jsonl``).
- ``/admin/settings``: the effective settings, read-only, secrets masked.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get
from litestar.params import FromQuery
from litestar.response import Stream

from backend.auth.policy import Permission
from backend.services.errors import InvalidInput
from backend.services.operations import audit_log
from backend.services.operations.settings_view import effective_settings
from backend.web.authentication import AppRuntime, DbSession
from frontend.rendering import LoginRequiredPages, render

KNOWN_ACTIONS = (
    "auth.",
    "workflow.",
    "webhook.",
    "schedule.",
    "credential.",
    "run.",
    "user.",
    "group.",
    "project.",
    "grant.",
    "token.",
    "settings.",
    "audit.",
)
OBJECT_TYPES = (
    "workflow",
    "webhook",
    "schedule",
    "credential",
    "run",
    "user",
    "session",
    "group",
    "project",
    "grant",
    "token",
    "settings",
    "audit_log",
)


def _filter_values(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The audit filter fields of the request's query (missing ones empty)."""
    return {k: request.query_params.get(k) or "" for k in audit_log.FILTER_FIELDS}


class AdminAuditPages(LoginRequiredPages):
    """The audit log page, its export, and the settings overview."""

    @get("/admin/audit", operation_id="page_audit", opt={"permission": Permission.AUDIT_READ})
    async def audit_page(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        before_id: FromQuery[int | None] = None,
    ) -> Response[str]:
        """The audit log, filtered by the query's ``actor``, ``action``, ``object_type``,
        ``object_id``, ``since``, ``until``; one keyset page at a time (400 for a malformed
        time)."""
        values = _filter_values(request)
        query = {k: v for k, v in values.items() if v}
        try:
            page = await audit_log.list_entries(
                db, audit_log.make_filter(**values), before_id=before_id
            )
            error = None
        except InvalidInput as exc:
            page, error = audit_log.AuditPage([], None), str(exc)
        names = await audit_log.object_names(db, page.entries)
        rows = [
            {
                "entry": e,
                "changes": audit_log.diff(e.before, e.after),
                "object_name": names.get((e.object_type, e.object_id)),
                "actor_name": names.get(("user", e.actor_user_id or "")),
            }
            for e in page.entries
        ]
        older = (
            "/admin/audit?" + urlencode({**query, "before_id": page.next_before_id})
            if page.next_before_id is not None
            else None
        )
        return render(
            request,
            "admin_audit.html",
            status_code=400 if error else 200,
            rows=rows,
            filters=values,
            error=error,
            older_url=older,
            newest_url="/admin/audit?" + urlencode(query) if before_id is not None else None,
            export_url="/admin/audit/export.jsonl" + ("?" + urlencode(query) if query else ""),
            known_actions=KNOWN_ACTIONS,
            object_types=OBJECT_TYPES,
        )

    @get(
        "/admin/audit/export.jsonl",
        operation_id="page_audit_export",
        opt={"permission": Permission.AUDIT_READ},
    )
    async def audit_export(self, request: Request[Any, Any, Any], runtime: AppRuntime) -> Stream:
        """Every entry matching the page's filters as JSON lines, streamed."""
        f = audit_log.make_filter(**_filter_values(request))
        lines = audit_log.export_lines(runtime.sessionmaker, f)
        return Stream(
            lines, media_type=audit_log.EXPORT_MEDIA_TYPE, headers=audit_log.EXPORT_HEADERS
        )

    @get(
        "/admin/settings",
        operation_id="page_settings",
        opt={"permission": Permission.SETTINGS_READ},
    )
    async def settings_page(
        self, request: Request[Any, Any, Any], runtime: AppRuntime
    ) -> Response[str]:
        """The effective settings of this process, secrets masked."""
        return render(request, "admin_settings.html", settings=effective_settings(runtime.settings))
