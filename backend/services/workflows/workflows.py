"""Workflow use cases: create, edit the draft, compile, publish immutable versions.

Every change is audited in its transaction (:mod:`backend.services.workflows.workflow_audit`)."""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy import ColumnElement, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Principal
from backend.db.models import User, Workflow, WorkflowVersion
from backend.db.versions import PUBLISHED
from backend.engine.expression_paths import JsonataReader
from backend.engine.expressions import JsonataChecker
from backend.engine.workflow_settings import SettingError, WorkflowSettings
from backend.services import paging
from backend.services.errors import InvalidInput
from backend.services.timestamps import rfc3339
from backend.services.triggers import schedules
from backend.services.triggers.events import subscriptions
from backend.services.workflows import diagram_checks, workflow_audit
from backend.triggers.schedule_rules import ScheduleError
from designer_schema.catalog import Catalog
from designer_schema.compiler import compile_diagram
from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import Diagram
from designer_schema.limits import (
    DiagramLimits,
    LimitError,
    check_diagram,
    check_json_depth,
)

_CHECKER = JsonataChecker()
_READER = JsonataReader()


class WorkflowNotFound(LookupError):
    """No workflow (or version) with that id."""


class PublishRejected(Exception):
    """The draft has compile errors; ``diagnostics`` lists them."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__(f"{len(diagnostics)} problem(s) block publishing")
        self.diagnostics = diagnostics


class WorkflowInUse(Exception):
    """The workflow cannot be deleted now; the message says what holds it."""


class WorkflowArchived(WorkflowInUse):
    """The workflow is archived: restore it before editing, publishing or running it."""

    def __init__(self, name: str) -> None:
        super().__init__(f"workflow {name!r} is archived: restore it first")


class WorkflowNotPublished(Exception):
    """The workflow has no published version to run: publish it first (409,
    state conflict)."""

    def __init__(self) -> None:
        super().__init__("publish the workflow before running it")


@dataclass
class PublishResult:
    """The version now active; ``created`` is False when the diagram was unchanged;
    ``warnings`` are the draft's warning diagnostics (they never block publishing)."""

    version: WorkflowVersion
    created: bool
    warnings: list[Diagnostic] = field(default_factory=list)


def new_webhook_token() -> str:
    """An unguessable webhook path token: 192 random bits, URL-safe."""
    return secrets.token_urlsafe(24)


def compile_for(diagram: Diagram, catalog: Catalog) -> tuple[Any, list[Diagnostic]]:
    """Compile ``diagram`` with the app's expression checker, checking the paths its
    expressions read against the upstream output schemas (docs/expressions.md)."""
    return compile_diagram(diagram, catalog, _CHECKER, _READER)


async def check_for(
    session: AsyncSession,
    diagram: Diagram,
    catalog: Catalog,
    workflow_id: uuid.UUID | None = None,
    principal: Principal | None = None,
) -> tuple[Any, list[Diagnostic]]:
    """:func:`compile_for` plus the diagnostics of what the diagram references
    (:mod:`backend.services.workflows.diagram_checks`: missing or wrong-typed credentials, missing
    or
    archived called workflows, children reading what their call does not send); with
    ``workflow_id`` (the diagram is its draft), a trigger declaring no input schema takes
    the one its callers send (those ``principal`` may read, when given). The graph is
    ``None`` when any diagnostic is an error."""
    return await diagram_checks.check(
        session, diagram, catalog, _CHECKER, _READER, workflow_id, principal
    )


def ensure_active(wf: Workflow) -> None:
    """Raise :class:`WorkflowArchived` when ``wf`` is archived."""
    if wf.archived_at is not None:
        raise WorkflowArchived(wf.name)


def check_diagram_limits(diagram: Diagram, limits: DiagramLimits) -> None:
    """Raise :class:`InvalidInput` naming the limit and where, when ``diagram`` is over one
    of ``limits`` (node and edge counts, each node config's depth and size)."""
    try:
        check_diagram(diagram, limits)
    except LimitError as err:
        raise InvalidInput(err.message, err.path) from None


def check_json_limit(value: Any, max_depth: int, where: str) -> None:
    """Raise :class:`InvalidInput` when the JSON ``value`` nests deeper than ``max_depth``."""
    try:
        check_json_depth(value, max_depth, path=where, limit="max_json_depth")
    except LimitError as err:
        raise InvalidInput(err.message, err.path) from None


def _validate_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise InvalidInput("name must not be empty", "name")
    if len(name) > 200:
        raise InvalidInput("name must be at most 200 characters", "name")
    return name


MAX_TAGS = 20
_NOT_TAG = re.compile(r"[^a-z0-9_.-]+")


def normalize_tags(tags: list[str]) -> list[str]:
    """Tags as stored: lower case, each run of characters other than ``a-z 0-9 _ . -``
    replaced by ``-``, trimmed of ``-`` and cut to 40 characters; empty ones and
    duplicates dropped, order kept. Raises :class:`InvalidInput` (field ``tags``) for more
    than :data:`MAX_TAGS`."""
    out: list[str] = []
    for raw in tags:
        tag = _NOT_TAG.sub("-", raw.strip().lower()).strip("-")[:40]
        if tag and tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"tags: at most {MAX_TAGS} tags", "tags")
    return out


async def create_workflow(
    session: AsyncSession,
    name: str,
    owner_id: uuid.UUID | None,
    description: str = "",
    tags: list[str] | None = None,
) -> Workflow:
    """Create a workflow whose draft holds a webhook trigger, ready to extend."""
    draft = Diagram(
        nodes=[],
        edges=[],
    )
    wf = Workflow(
        name=_validate_name(name),
        description=description,
        tags=normalize_tags(tags or []),
        owner_id=owner_id,
        draft=msgspec.to_builtins(draft),
        webhook_token=new_webhook_token(),
    )
    session.add(wf)
    await session.flush()
    await workflow_audit.created(session, wf)
    return wf


async def get_workflow(session: AsyncSession, workflow_id: uuid.UUID) -> Workflow:
    """Return the workflow; raises :class:`WorkflowNotFound`."""
    wf = await session.get(Workflow, workflow_id)
    if wf is None:
        raise WorkflowNotFound(f"workflow {workflow_id} not found")
    return wf


async def list_workflows(
    session: AsyncSession,
    visible: ColumnElement[bool] | None = None,
    *,
    archived: bool = False,
) -> list[Workflow]:
    """The workflows matching ``visible`` (a filter of
    :func:`backend.services.identity.access.workflow_filter`), most recently updated first: the
    active ones, or with ``archived`` only the archived ones (most recently archived
    first)."""
    if archived:
        query = select(Workflow).where(Workflow.archived_at.is_not(None))
        query = query.order_by(Workflow.archived_at.desc())
    else:
        query = select(Workflow).where(Workflow.archived_at.is_(None))
        query = query.order_by(Workflow.updated_at.desc())
    if visible is not None:
        query = query.where(visible)
    rows = await session.execute(query)
    return list(rows.scalars())


async def page_workflows(
    session: AsyncSession,
    visible: ColumnElement[bool] | None = None,
    *,
    archived: bool = False,
    cursor: str | None = None,
    limit: int = paging.DEFAULT_LIMIT,
) -> paging.Slice[Workflow]:
    """One page of the workflows :func:`list_workflows` lists, newest first by
    ``(created_at, id)``, after ``cursor`` (:mod:`backend.services.paging`; raises
    ``BadCursor``)."""
    archived_at = Workflow.archived_at
    query = select(Workflow).where(archived_at.is_not(None) if archived else archived_at.is_(None))
    if visible is not None:
        query = query.where(visible)
    page = await paging.page_query(
        session,
        query,
        (Workflow.created_at, Workflow.id),
        tuple[datetime, uuid.UUID],
        lambda row: (row[0].created_at, row[0].id),
        collection="workflows",
        cursor=cursor,
        limit=limit,
    )
    return paging.Slice([row[0] for row in page.items], page.next_cursor)


async def update_workflow(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    *,
    name: str | None = None,
    description: str | None = None,
    tags: list[str] | None = None,
) -> Workflow:
    """Rename, re-describe or re-tag a workflow (:func:`normalize_tags`)."""
    wf = await get_workflow(session, workflow_id)
    ensure_active(wf)
    before = workflow_audit.workflow_fields(wf)
    if name is not None:
        wf.name = _validate_name(name)
    if description is not None:
        wf.description = description
    if tags is not None:
        wf.tags = normalize_tags(tags)
    await session.flush()
    await workflow_audit.updated(session, wf, before)
    return wf


WORKFLOW_SETTINGS = tuple(WorkflowSettings.__struct_fields__)
"""Keys of ``workflows.settings`` (run control, docs/engine.md)."""


async def update_settings(
    session: AsyncSession, workflow_id: uuid.UUID, changes: dict[str, Any]
) -> Workflow:
    """Change the run-control settings of a workflow; a ``None`` value clears a setting.

    The rules are :class:`~backend.engine.workflow_settings.WorkflowSettings`'; the error
    workflow must also exist. Raises :class:`InvalidInput` naming the field
    (``settings.<key>``) or :class:`WorkflowNotFound`.
    """
    wf = await get_workflow(session, workflow_id)
    ensure_active(wf)
    before = dict(wf.settings or {})
    try:
        settings = WorkflowSettings.from_stored(wf.settings).changed(
            changes, workflow_id=workflow_id
        )
    except SettingError as exc:
        raise InvalidInput(str(exc), f"settings.{exc.key}") from None
    target = changes.get("error_workflow_id")
    if target is not None and settings.error_workflow_id is not None:
        if await session.get(Workflow, uuid.UUID(settings.error_workflow_id)) is None:
            raise InvalidInput(
                f"workflow {settings.error_workflow_id} not found", "settings.error_workflow_id"
            )
    wf.settings = {
        **{k: v for k, v in (wf.settings or {}).items() if k not in WORKFLOW_SETTINGS},
        **settings.stored(),
    }
    await session.flush()
    await workflow_audit.settings_changed(session, workflow_id, before, dict(wf.settings))
    return wf


class DraftConflict(Exception):
    """The draft changed since the revision the caller's edit was based on.

    ``revision`` is the stored revision, ``saved_by`` the user who saved it (display name or
    e-mail; None when unknown) and ``saved_at`` when (None for a draft never saved since
    creation).
    """

    def __init__(self, revision: int, saved_by: str | None, saved_at: datetime | None) -> None:
        who = saved_by or "someone else"
        when = f" at {rfc3339(saved_at.replace(microsecond=0))}" if saved_at else ""
        super().__init__(f"the draft was changed by {who}{when} (revision {revision})")
        self.revision = revision
        self.saved_by = saved_by
        self.saved_at = saved_at


@dataclass
class DraftSaved:
    """Outcome of a draft save: the new revision and the draft's diagnostics."""

    revision: int
    diagnostics: list[Diagnostic]


async def save_draft(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    diagram: Diagram,
    catalog: Catalog,
    *,
    base_revision: int | None = None,
    user_id: uuid.UUID | None = None,
    principal: Principal | None = None,
) -> DraftSaved:
    """Store ``diagram`` as the draft (even with errors) and return its diagnostics.

    Optimistic concurrency: with ``base_revision`` (the ``draft_revision`` the editor loaded
    or last saved) the save is refused with :class:`DraftConflict` when someone saved since;
    without it the draft is overwritten (API clients that do not track revisions). The row is
    locked (``SELECT ... FOR UPDATE``) so two concurrent saves on the same base revision
    cannot both succeed. Raises :class:`WorkflowNotFound`.
    """
    row = await session.execute(
        select(Workflow)
        .where(Workflow.id == workflow_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    wf = row.scalar_one_or_none()
    if wf is None:
        raise WorkflowNotFound(f"workflow {workflow_id} not found")
    ensure_active(wf)
    if base_revision is not None and base_revision != wf.draft_revision:
        saved_by = await session.get(User, wf.draft_saved_by) if wf.draft_saved_by else None
        raise DraftConflict(
            wf.draft_revision,
            (saved_by.display_name or saved_by.email) if saved_by else None,
            wf.draft_saved_at,
        )
    before = wf.draft
    wf.draft = msgspec.to_builtins(diagram)
    wf.draft_revision += 1
    wf.draft_saved_by = user_id
    wf.draft_saved_at = datetime.now(UTC)
    await session.flush()
    await workflow_audit.draft_saved(session, workflow_id, before, wf.draft)
    _, diagnostics = await check_for(session, diagram, catalog, workflow_id, principal)
    return DraftSaved(wf.draft_revision, diagnostics)


async def publish(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    catalog: Catalog,
    user_id: uuid.UUID | None,
    note: str = "",
    principal: Principal | None = None,
) -> PublishResult:
    """Compile the draft and store it as the next immutable version, made active, with the
    publisher's ``note`` (what changed, why; stripped, may be empty).

    An unchanged graph (same content hash as an existing version) creates no version: that
    version becomes active again (its note is kept). Raises :class:`PublishRejected` on
    compile errors.
    """
    wf = (
        await session.execute(select(Workflow).where(Workflow.id == workflow_id).with_for_update())
    ).scalar_one_or_none()
    if wf is None:
        raise WorkflowNotFound(f"workflow {workflow_id} not found")
    ensure_active(wf)
    previous = wf.active_version
    diagram = msgspec.convert(wf.draft, Diagram)
    graph, diagnostics = await check_for(session, diagram, catalog, workflow_id, principal)
    errors = [d for d in diagnostics if d.severity == "error"]
    if graph is None or errors:
        raise PublishRejected(errors or diagnostics)
    warnings = [d for d in diagnostics if d.severity == "warning"]
    existing = (
        await session.execute(
            select(WorkflowVersion).where(
                WorkflowVersion.workflow_id == workflow_id,
                WorkflowVersion.kind == PUBLISHED,
                WorkflowVersion.content_hash == graph.content_hash,
            )
        )
    ).scalar_one_or_none()
    if existing is not None:
        wf.active_version = existing.number
        await session.flush()
        await _sync_triggers(session, wf.id, existing, catalog)
        await workflow_audit.published(session, wf, existing, False, previous)
        return PublishResult(existing, False, warnings)
    latest = (
        await session.execute(
            select(func.max(WorkflowVersion.number)).where(
                WorkflowVersion.workflow_id == workflow_id, WorkflowVersion.kind == PUBLISHED
            )
        )
    ).scalar_one()
    version = WorkflowVersion(
        workflow_id=workflow_id,
        number=(latest or 0) + 1,
        diagram=msgspec.to_builtins(diagram),
        graph=msgspec.to_builtins(graph),
        content_hash=graph.content_hash,
        created_by=user_id,
        note=note.strip(),
    )
    session.add(version)
    wf.active_version = version.number
    await session.flush()
    await _sync_triggers(session, wf.id, version, catalog)
    await workflow_audit.published(session, wf, version, True, previous)
    return PublishResult(version, True, warnings)


async def _sync_triggers(
    session: AsyncSession, workflow_id: uuid.UUID, v: WorkflowVersion, catalog: Catalog
) -> None:
    """Make the schedule row and the event service's subscription follow the now active
    version (PublishRejected if the schedule is invalid)."""
    now = datetime.now(UTC)
    await subscriptions.sync_subscription(
        session, workflow_id, v.number, v.graph, now, getattr(catalog, "triggers", {})
    )
    try:
        await schedules.sync_schedule(session, workflow_id, v.number, v.graph, now)
    except ScheduleError as exc:
        _, node_id, _ = schedules.trigger_config(v.graph)
        raise PublishRejected(
            [Diagnostic("error", "invalid_config", str(exc), node_id, None, exc.field)]
        ) from exc


async def active_version(session: AsyncSession, wf: Workflow) -> WorkflowVersion | None:
    """The active version of ``wf`` or ``None`` when it was never published."""
    if wf.active_version is None:
        return None
    return (
        await session.execute(
            select(WorkflowVersion).where(
                WorkflowVersion.workflow_id == wf.id,
                WorkflowVersion.number == wf.active_version,
            )
        )
    ).scalar_one_or_none()


async def workflow_by_webhook_token(session: AsyncSession, token: str) -> Workflow | None:
    """The workflow whose webhook path token is ``token``."""
    return (
        await session.execute(select(Workflow).where(Workflow.webhook_token == token))
    ).scalar_one_or_none()
