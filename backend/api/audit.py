"""``/api/admin/audit``: the audit log, filtered and keyset-paginated, and its JSON-lines
export; ``/api/admin/settings``: the effective settings, secrets masked.

Both need ``audit:read`` / ``settings:read`` (admins). Filters (all optional, combined):
``actor`` (email, user id or ``system``), ``action`` (prefix, e.g. ``workflow.``),
``object_type``, ``object_id``, ``since``/``until`` (ISO 8601; no offset means UTC;
``since <= at < until``). Pages: newest first, ``before_id`` from the previous page's
``next_before_id``.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from litestar import Controller, Request, get
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery
from litestar.response import Stream

from backend.api.list_schemas import AuditList, SettingList
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, listed, page_links
from backend.auth.policy import Permission
from backend.services.operations import audit_log
from backend.services.operations.settings_view import effective_settings
from backend.services.paging import Slice, decode_cursor, encode_cursor
from backend.web.authentication import AppRuntime, DbSession
from backend.web.guards import access_dependencies


def provide_filter(
    actor: FromQuery[str | None] = None,
    action: FromQuery[str | None] = None,
    object_type: FromQuery[str | None] = None,
    object_id: FromQuery[str | None] = None,
    since: FromQuery[str | None] = None,
    until: FromQuery[str | None] = None,
) -> audit_log.AuditFilter:
    """The filter of an audit request from its query (400 naming a malformed time)."""
    return audit_log.make_filter(
        actor=actor,
        action=action,
        object_type=object_type,
        object_id=object_id,
        since=since,
        until=until,
    )


AuditFilterParam: TypeAlias = NamedDependency[audit_log.AuditFilter]
"""Parameter ``audit_filter``: the request's filter (:func:`provide_filter`)."""


class AuditController(Controller):
    """The audit log (read-only: PostgreSQL refuses changes to it)."""

    path = "/api/v1/admin/audit"
    tags = ["admin"]
    dependencies = {
        **access_dependencies(),
        "audit_filter": Provide(provide_filter, sync_to_thread=False),
    }

    @get("/", operation_id="list_audit_entries", opt={"permission": Permission.AUDIT_READ})
    async def list_entries(
        self,
        db: DbSession,
        audit_filter: AuditFilterParam,
        request: Request[Any, Any, Any],
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> AuditList:
        """One page of matching entries, newest first (by id)."""
        before_id = decode_cursor(cursor, tuple[int], "audit")[0] if cursor is not None else None
        page = await audit_log.list_entries(db, audit_filter, before_id=before_id, limit=limit)
        more = page.next_before_id
        found = Slice(page.entries, encode_cursor([more], "audit") if more is not None else None)
        return AuditList(data=found.items, **page_links(request, found))

    @get(
        "/export.jsonl",
        operation_id="export_audit_entries",
        opt={"permission": Permission.AUDIT_READ},
        media_type=audit_log.EXPORT_MEDIA_TYPE,
    )
    async def export(self, runtime: AppRuntime, audit_filter: AuditFilterParam) -> Stream:
        """Every matching entry as JSON lines (one object per line, newest first), streamed."""
        lines = audit_log.export_lines(runtime.sessionmaker, audit_filter)
        return Stream(
            lines, media_type=audit_log.EXPORT_MEDIA_TYPE, headers=audit_log.EXPORT_HEADERS
        )


class SettingsController(Controller):
    """The effective settings of this process, read-only."""

    path = "/api/v1/admin/settings"
    tags = ["admin"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_settings", opt={"permission": Permission.SETTINGS_READ})
    async def list_settings(
        self,
        request: Request[Any, Any, Any],
        runtime: AppRuntime,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> SettingList:
        """Every setting with its variable, by name; secrets show only whether they are set."""
        found = effective_settings(runtime.settings)
        return listed(
            request, SettingList, found, lambda s: (s.name,), tuple[str], cursor=cursor, limit=limit
        )
