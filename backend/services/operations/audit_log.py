"""Reading the audit log: filtered keyset pages, a streamed export, the before/after diff,
and retention.

Rows are written only by :func:`backend.services.audit.record`; PostgreSQL refuses to
change or delete them (migration ``0010_audit``) except through ``audit_log_purge``, which
:func:`purge_expired` calls. Pages are keyset-paginated on the row id, newest first: a
page asks for rows with ``id < before_id``, so pages stay stable while rows are added and
each costs one index range scan whatever the depth.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy import Select, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import AuditLog, User, Workflow
from backend.db.models.access import Group, Project
from backend.db.models.credentials import Credential
from backend.services import audit
from backend.services.errors import InvalidInput
from backend.services.timestamps import rfc3339_members

PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
EXPORT_BATCH = 500
EXPORT_MEDIA_TYPE = "application/x-ndjson"
EXPORT_HEADERS = {"Content-Disposition": 'attachment; filename="railyard-audit.jsonl"'}
"""Media type and headers of a JSON-lines export download."""
FILTER_FIELDS = ("actor", "action", "object_type", "object_id", "since", "until")
"""The filter parameters of the audit page and API (see :func:`make_filter`)."""
SYSTEM_ACTOR = "system"
"""The actor filter value that selects rows without an actor (webhooks, schedules, sweeper)."""


class AuditEntry(msgspec.Struct):
    """One audit row as shown and exported (``at`` in UTC; ``actor_label`` the email or
    token name when written; ``address`` the client IP; ``request_id`` the X-Request-ID).

    Times in ``details`` and the ``*_at`` members of ``before``/``after`` are answered
    RFC 3339 UTC ending ``Z``, also in rows written ending ``+00:00``; the rest of the
    snapshots (a workflow's draft, pinned data) is answered as stored."""

    id: int
    at: datetime
    action: str
    object_type: str
    object_id: str
    actor_user_id: str | None
    actor_label: str | None
    address: str | None
    request_id: str | None
    before: Any
    after: Any
    details: dict[str, Any]


class AuditPage(msgspec.Struct):
    """A page of entries, newest first; ``next_before_id``: pass it as ``before_id`` for
    the next (older) page, ``None`` on the last page."""

    entries: list[AuditEntry]
    next_before_id: int | None


@dataclass(frozen=True)
class AuditFilter:
    """Which rows to show; every field optional, all given ones must hold.

    ``actor``: an email/label (case-insensitive, exact), a user id, or ``"system"`` (rows
    without an actor); ``action``: a prefix (``workflow.`` or ``run.cancel``);
    ``object_type``/``object_id``: exact; ``since``/``until``: ``since <= at < until``.
    """

    actor: str | None = None
    action: str | None = None
    object_type: str | None = None
    object_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def parse_time(value: str | None, field: str) -> datetime | None:
    """An ISO 8601 date or date-time (``2026-12-01``, ``2026-12-01T08:00``, with or without
    an offset; without one it is UTC), or ``None`` for an empty value.

    Raises :class:`~backend.services.errors.InvalidInput` naming ``field``.
    """
    if value is None or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(
            f"{field} must be an ISO 8601 date or date-time, e.g. 2026-12-01T08:00, got {value!r}",
            field,
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def make_filter(
    *,
    actor: str | None = None,
    action: str | None = None,
    object_type: str | None = None,
    object_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> AuditFilter:
    """An :class:`AuditFilter` from request values (empty strings mean "any"); raises
    :class:`~backend.services.errors.InvalidInput` for a malformed time."""
    return AuditFilter(
        actor=actor or None,
        action=action or None,
        object_type=object_type or None,
        object_id=object_id or None,
        since=parse_time(since, "since"),
        until=parse_time(until, "until"),
    )


def _filtered(stmt: Select[Any], f: AuditFilter) -> Select[Any]:
    if f.actor:
        actor = f.actor.strip()
        if actor.lower() == SYSTEM_ACTOR:
            stmt = stmt.where(AuditLog.actor_user_id.is_(None), AuditLog.actor_label.is_(None))
        else:
            try:
                stmt = stmt.where(AuditLog.actor_user_id == uuid.UUID(actor))
            except ValueError:
                stmt = stmt.where(func.lower(AuditLog.actor_label) == actor.lower())
    if f.action:
        stmt = stmt.where(AuditLog.action.startswith(f.action.strip(), autoescape=True))
    if f.object_type:
        stmt = stmt.where(AuditLog.object_type == f.object_type.strip())
    if f.object_id:
        stmt = stmt.where(AuditLog.object_id == f.object_id.strip())
    if f.since is not None:
        stmt = stmt.where(AuditLog.at >= f.since)
    if f.until is not None:
        stmt = stmt.where(AuditLog.at < f.until)
    return stmt


def _entry(row: AuditLog) -> AuditEntry:
    return AuditEntry(
        id=row.id,
        at=row.at,
        action=row.action,
        object_type=row.object_type,
        object_id=row.object_id,
        actor_user_id=str(row.actor_user_id) if row.actor_user_id else None,
        actor_label=row.actor_label,
        address=row.address,
        request_id=row.request_id,
        before=rfc3339_members(row.before, "_at"),
        after=rfc3339_members(row.after, "_at"),
        details=rfc3339_members(dict(row.details or {})),
    )


async def list_entries(
    session: AsyncSession,
    f: AuditFilter,
    *,
    before_id: int | None = None,
    limit: int = PAGE_SIZE,
) -> AuditPage:
    """One page of matching rows, newest first, older than ``before_id`` when given.

    ``limit`` is clamped to 1..1000 (the API refuses a limit outside it).
    """
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    stmt = _filtered(select(AuditLog), f)
    if before_id is not None:
        stmt = stmt.where(AuditLog.id < before_id)
    rows = list(
        (await session.execute(stmt.order_by(AuditLog.id.desc()).limit(limit + 1))).scalars()
    )
    more = len(rows) > limit
    entries = [_entry(r) for r in rows[:limit]]
    return AuditPage(entries, entries[-1].id if more and entries else None)


async def export_lines(
    sessionmaker: async_sessionmaker[AsyncSession], f: AuditFilter
) -> AsyncIterator[bytes]:
    """Every matching row as JSON lines (one ``AuditEntry`` object per line, newest first),
    read in batches of 500 with a short session each, so an export of any size holds
    neither a transaction nor the whole log in memory."""
    before_id: int | None = None
    while True:
        async with sessionmaker() as session:
            page = await list_entries(session, f, before_id=before_id, limit=EXPORT_BATCH)
        if page.entries:
            yield b"".join(msgspec.json.encode(e) + b"\n" for e in page.entries)
        if page.next_before_id is None:
            return
        before_id = page.next_before_id


class Change(msgspec.Struct):
    """One difference between ``before`` and ``after``: ``path`` in dotted form
    (``settings.max_concurrent_runs``; ``""`` for the whole value); ``None`` when absent."""

    path: str
    before: Any
    after: Any


def diff(before: Any, after: Any, path: str = "") -> list[Change]:
    """The changes from ``before`` to ``after``, descending into objects key by key (keys in
    sorted order; a missing object, as before a creation, counts as empty); lists and
    scalars compare as whole values."""
    if isinstance(before, dict) and after is None:
        after = {}
    if isinstance(after, dict) and before is None:
        before = {}
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[Change] = []
        for key in sorted(set(before) | set(after), key=str):
            sub = f"{path}.{key}" if path else str(key)
            changes += diff(before.get(key), after.get(key), sub)
        return changes
    return [] if before == after else [Change(path, before, after)]


async def purge_expired(
    session: AsyncSession, keep_days: int, *, max_rows: int | None = None, record: bool = True
) -> int:
    """Delete rows older than ``keep_days`` days through ``audit_log_purge`` (the only way
    PostgreSQL lets audit rows go): all of them, or at most the ``max_rows`` oldest (one
    batch of retention, backend/services/operations/retention.py). With ``record`` the deletion is
    audited as ``audit.purge`` when any row went (retention records one per pass instead).

    ``keep_days`` 0 keeps everything (returns 0). Returns the number of rows deleted.
    """
    if keep_days <= 0:
        return 0
    if max_rows is None:
        sql, params = "select audit_log_purge(:d)", {"d": keep_days}
    else:
        sql, params = "select audit_log_purge(:d, :n)", {"d": keep_days, "n": max_rows}
    deleted = int((await session.execute(text(sql), params)).scalar_one())
    if deleted and record:
        await record_purge(session, deleted, days=keep_days)
    return deleted


async def record_purge(session: AsyncSession, deleted: int, *, days: int) -> None:
    """Audit that ``deleted`` rows older than ``days`` days were purged (``audit.purge``)."""
    await audit.record(
        session,
        "audit.purge",
        "audit_log",
        f"older-than-{days}-days",
        details={"deleted": deleted, "keep_days": days},
    )


async def object_names(
    session: AsyncSession, entries: list[AuditEntry]
) -> dict[tuple[str, str], str]:
    """``{(object_type, object_id): name}`` for the entries' workflows, credentials,
    groups and projects (their names) and users (their emails; actors too), so the audit
    page shows who changed what by name; ids that are not UUIDs or no longer exist are left
    out (the page shows the id alone)."""
    tables: dict[str, tuple[Any, Any]] = {
        "workflow": (Workflow.id, Workflow.name),
        "credential": (Credential.id, Credential.name),
        "group": (Group.id, Group.name),
        "project": (Project.id, Project.name),
        "user": (User.id, User.email),
    }
    wanted: dict[str, set[uuid.UUID]] = {}
    pairs = [(e.object_type, e.object_id) for e in entries]
    pairs += [("user", e.actor_user_id) for e in entries if e.actor_user_id]
    for kind, object_id in pairs:
        if kind in tables and object_id:
            try:
                wanted.setdefault(kind, set()).add(uuid.UUID(str(object_id)))
            except ValueError:
                continue
    names: dict[tuple[str, str], str] = {}
    for kind, ids in wanted.items():
        id_column, name_column = tables[kind]
        rows = await session.execute(select(id_column, name_column).where(id_column.in_(ids)))
        for object_id, name in rows:
            names[(kind, str(object_id))] = str(name)
    return names
