"""Version history of a workflow: who published which version when (with the publisher's
note), one version's diagram, the difference between two versions (or a version and the
draft), and restoring a version into the draft.

Restoring is a draft save (:func:`backend.services.workflows.workflows.save_draft`): it follows the
draft-revision rule (a restore based on an older revision is refused with
:class:`~backend.services.workflows.workflows.DraftConflict`) and is audited as
``workflow.version_restore``
(before/after: :func:`~backend.services.workflows.workflow_audit.draft_summary` of the draft;
details: the version number and the new draft revision).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import msgspec
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Principal
from backend.db.models import User, Workflow, WorkflowVersion
from backend.db.versions import PUBLISHED
from backend.services import audit
from backend.services.errors import InvalidInput
from backend.services.workflows import workflow_audit
from backend.services.workflows.workflows import (
    DraftSaved,
    WorkflowNotFound,
    get_workflow,
    save_draft,
)
from designer_schema.catalog import Catalog
from designer_schema.diagram import Diagram
from designer_schema.diff import DiagramDiff, diff_diagrams

MAX_VERSION = 2**31 - 1
"""The highest version number there can be (``workflow_versions.number`` is an integer)."""

DRAFT = "draft"
"""The name of the draft where a version number is expected (``?from=draft``)."""


@dataclass(frozen=True)
class VersionEntry:
    """One line of the history: ``number``; ``publisher`` is the display name or e-mail
    (None when the account is gone); ``active`` marks the version webhooks and schedules
    run."""

    number: int
    content_hash: str
    created_at: datetime
    created_by: uuid.UUID | None
    publisher: str | None
    note: str
    active: bool
    nodes: int
    edges: int


@dataclass(frozen=True)
class Comparison:
    """Two diagrams and what changed from ``before`` to ``after``; ``before_ref`` and
    ``after_ref`` are version numbers or :data:`DRAFT`."""

    before_ref: int | str
    after_ref: int | str
    before: Diagram
    after: Diagram
    diff: DiagramDiff


@dataclass(frozen=True)
class DraftInfo:
    """The draft's ``revision`` and who saved it last (name; None when unknown), when."""

    revision: int
    saved_by: str | None
    saved_at: datetime | None


async def draft_info(session: AsyncSession, wf: Workflow) -> DraftInfo:
    """Revision and last saver of ``wf``'s draft."""
    user = await session.get(User, wf.draft_saved_by) if wf.draft_saved_by else None
    return DraftInfo(wf.draft_revision, _publisher(user), wf.draft_saved_at)


def parse_ref(value: str | int | None, where: str) -> int | str:
    """A version number (``"3"``, ``3``) or :data:`DRAFT`; raises :class:`InvalidInput`
    naming ``where`` (the query parameter) for anything else."""
    if isinstance(value, int) and value >= 1:
        return value
    text = str(value if value is not None else "").strip().lower()
    if text == DRAFT:
        return DRAFT
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise InvalidInput(f"{where} must be a version number (1, 2, ...) or 'draft'", where)


def _publisher(user: User | None) -> str | None:
    return (user.display_name or user.email) if user is not None else None


async def history(session: AsyncSession, workflow_id: uuid.UUID) -> list[VersionEntry]:
    """Every published version of the workflow, newest first (raises
    :class:`WorkflowNotFound`)."""
    wf = await get_workflow(session, workflow_id)
    rows = await session.execute(
        select(WorkflowVersion, User)
        .outerjoin(User, User.id == WorkflowVersion.created_by)
        .where(WorkflowVersion.workflow_id == workflow_id, WorkflowVersion.kind == PUBLISHED)
        .order_by(WorkflowVersion.number.desc())
    )
    return [
        VersionEntry(
            number=v.number,
            content_hash=v.content_hash,
            created_at=v.created_at,
            created_by=v.created_by,
            publisher=_publisher(user),
            note=v.note,
            active=v.number == wf.active_version,
            nodes=len(v.diagram.get("nodes") or []),
            edges=len(v.diagram.get("edges") or []),
        )
        for v, user in rows.all()
    ]


async def get_version(
    session: AsyncSession, workflow_id: uuid.UUID, number: int
) -> tuple[WorkflowVersion, str | None]:
    """Version ``number`` of the workflow and its publisher's name; raises
    :class:`WorkflowNotFound` when the workflow or the version does not exist."""
    if not 1 <= number <= MAX_VERSION:
        await get_workflow(session, workflow_id)
        raise WorkflowNotFound(f"workflow {workflow_id} has no version {number}")
    row = (
        await session.execute(
            select(WorkflowVersion, User)
            .outerjoin(User, User.id == WorkflowVersion.created_by)
            .where(WorkflowVersion.workflow_id == workflow_id, WorkflowVersion.number == number)
        )
    ).first()
    if row is None:
        await get_workflow(session, workflow_id)
        raise WorkflowNotFound(f"workflow {workflow_id} has no version {number}")
    return row[0], _publisher(row[1])


async def diagram_at(session: AsyncSession, wf: Workflow, ref: int | str) -> Diagram:
    """The diagram of version ``ref`` of ``wf``, or its draft for :data:`DRAFT`."""
    if ref == DRAFT:
        return msgspec.convert(wf.draft, Diagram)
    version, _ = await get_version(session, wf.id, int(ref))
    return msgspec.convert(version.diagram, Diagram)


async def compare(
    session: AsyncSession, workflow_id: uuid.UUID, before_ref: int | str, after_ref: int | str
) -> Comparison:
    """What changed from ``before_ref`` to ``after_ref`` (version numbers or
    :data:`DRAFT`), positions ignored (:func:`designer_schema.diff.diff_diagrams`)."""
    wf = await get_workflow(session, workflow_id)
    before = await diagram_at(session, wf, before_ref)
    after = await diagram_at(session, wf, after_ref)
    return Comparison(before_ref, after_ref, before, after, diff_diagrams(before, after))


async def restore(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    number: int,
    catalog: Catalog,
    *,
    base_revision: int | None,
    user_id: uuid.UUID | None,
    principal: Principal | None = None,
) -> tuple[DraftSaved, Diagram]:
    """Make version ``number``'s diagram the draft: a draft save based on
    ``base_revision`` (None overwrites), audited as ``workflow.version_restore``; its
    diagnostics are ``principal``'s (a child typed by the callers that person may read).

    Returns the save (new revision, diagnostics) and the restored diagram. Raises
    :class:`WorkflowNotFound` and :class:`~backend.services.workflows.workflows.DraftConflict`.
    The caller checks the diagram's references against the user first
    (:func:`backend.services.identity.references.check_diagram`).
    """
    version, _ = await get_version(session, workflow_id, number)
    diagram = msgspec.convert(version.diagram, Diagram)
    before = dict((await get_workflow(session, workflow_id)).draft)
    saved = await save_draft(
        session,
        workflow_id,
        diagram,
        catalog,
        base_revision=base_revision,
        user_id=user_id,
        principal=principal,
    )
    await audit.record(
        session,
        "workflow.version_restore",
        "workflow",
        workflow_id,
        before=workflow_audit.draft_summary(before),
        after=workflow_audit.draft_summary(msgspec.to_builtins(diagram)),
        details={"version": number, "revision": saved.revision},
    )
    return saved, diagram
