"""The audit rows of workflow changes (called by :mod:`backend.services.workflows.workflows` in the
transaction of each change).

- ``workflow.create``: a workflow is created (after: name, description, owner);
- ``workflow.update``: name or description change (before/after: the changed fields);
- ``workflow.settings``: run-control settings change (before/after: the settings);
- ``workflow.draft_save``: the draft is saved, compactly (before/after: node and edge
  counts and a hash of the draft) and at most once per workflow and actor per
  :data:`DRAFT_AUDIT_SECONDS`;
- ``workflow.publish``: publish (before/after: the active version; details: ``version``,
  ``created``, ``content_hash``);
- ``workflow.archive``: a workflow is archived, the UI's "delete" (before/after:
  ``archived``; details: its active version and how many runs it keeps);
- ``workflow.restore``: an archived workflow is restored (before/after: ``archived``);
- ``workflow.duplicate``: a workflow is copied (on the copy; after: its fields; details:
  ``source`` id and name);
- ``webhook.settings``: a publish changes the Webhook trigger's config (before/after: the
  trigger config; the secret lives apart and is never in it).

Nothing is recorded when nothing changed.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Workflow, WorkflowVersion
from backend.services import audit
from backend.services.triggers.schedules import trigger_config

DRAFT_AUDIT_SECONDS = 15 * 60
"""Draft saves by one actor on one workflow within this many seconds of the last recorded
one are not recorded again (the designer saves on every edit; publish records the result)."""

WEBHOOK_TRIGGER = "trigger.webhook"


def workflow_fields(wf: Workflow) -> dict[str, Any]:
    """The audited fields of a workflow (never its draft or webhook token)."""
    return {
        "name": wf.name,
        "description": wf.description,
        "tags": list(wf.tags or []),
        "owner_id": str(wf.owner_id) if wf.owner_id else None,
    }


def draft_summary(draft: dict[str, Any] | None) -> dict[str, Any]:
    """A compact fingerprint of a diagram: node and edge counts and a 16-hex-digit SHA-256
    prefix of its canonical JSON (sorted keys)."""
    draft = draft or {}
    canonical = json.dumps(draft, sort_keys=True, separators=(",", ":"), default=str)
    return {
        "nodes": len(draft.get("nodes") or []),
        "edges": len(draft.get("edges") or []),
        "hash": hashlib.sha256(canonical.encode()).hexdigest()[:16],
    }


async def created(session: AsyncSession, wf: Workflow) -> None:
    """Record ``workflow.create``."""
    await audit.record(session, "workflow.create", "workflow", wf.id, after=workflow_fields(wf))


async def archived(session: AsyncSession, wf: Workflow, runs: int) -> None:
    """Record ``workflow.archive`` (``runs``: how many runs the workflow keeps)."""
    await audit.record(
        session,
        "workflow.archive",
        "workflow",
        wf.id,
        before={"archived": False},
        after={"archived": True},
        details={"name": wf.name, "active_version": wf.active_version, "runs": runs},
    )


async def restored(session: AsyncSession, wf: Workflow) -> None:
    """Record ``workflow.restore``."""
    await audit.record(
        session,
        "workflow.restore",
        "workflow",
        wf.id,
        before={"archived": True},
        after={"archived": False},
        details={"name": wf.name},
    )


async def duplicated(session: AsyncSession, copy: Workflow, source: Workflow) -> None:
    """Record ``workflow.duplicate`` on the new workflow ``copy`` of ``source``."""
    await audit.record(
        session,
        "workflow.duplicate",
        "workflow",
        copy.id,
        after=workflow_fields(copy),
        details={"source": str(source.id), "source_name": source.name},
    )


async def updated(session: AsyncSession, wf: Workflow, before: dict[str, Any]) -> None:
    """Record ``workflow.update`` when the fields changed from ``before``
    (:func:`workflow_fields` taken before the change)."""
    after = workflow_fields(wf)
    changed = [k for k in after if after[k] != before.get(k)]
    if changed:
        await audit.record(
            session,
            "workflow.update",
            "workflow",
            wf.id,
            before={k: before.get(k) for k in changed},
            after={k: after[k] for k in changed},
        )


async def settings_changed(
    session: AsyncSession, workflow_id: uuid.UUID, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """Record ``workflow.settings`` when the run-control settings changed."""
    if before != after:
        await audit.record(
            session, "workflow.settings", "workflow", workflow_id, before=before, after=after
        )


async def draft_saved(
    session: AsyncSession, workflow_id: uuid.UUID, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """Record ``workflow.draft_save`` compactly (:func:`draft_summary` before/after), unless
    the draft is unchanged or the same actor's last one on this workflow is recent."""
    old, new = draft_summary(before), draft_summary(after)
    if old == new:
        return
    if await audit.recorded_within(
        session, "workflow.draft_save", "workflow", workflow_id, DRAFT_AUDIT_SECONDS
    ):
        return
    await audit.record(
        session,
        "workflow.draft_save",
        "workflow",
        workflow_id,
        before=old,
        after=new,
        details={"debounce_seconds": DRAFT_AUDIT_SECONDS},
    )


async def published(
    session: AsyncSession,
    wf: Workflow,
    version: WorkflowVersion,
    created: bool,
    previous_number: int | None,
) -> None:
    """Record ``workflow.publish`` and, when the Webhook trigger's config differs from the
    previously active version's, ``webhook.settings`` with both configs. Publishing the
    version that is already active (an unchanged draft) records nothing."""
    if not created and previous_number == version.number:
        return
    await audit.record(
        session,
        "workflow.publish",
        "workflow",
        wf.id,
        before={"active_version": previous_number},
        after={"active_version": version.number},
        details={
            "version": version.number,
            "created": created,
            "content_hash": version.content_hash,
            "note": version.note,
        },
    )
    old_graph: dict[str, Any] = {}
    if previous_number is not None:
        old_graph = (
            await session.execute(
                select(WorkflowVersion.graph).where(
                    WorkflowVersion.workflow_id == wf.id,
                    WorkflowVersion.number == previous_number,
                )
            )
        ).scalar_one_or_none() or {}
    old_type, _, old_config = trigger_config(old_graph)
    new_type, _, new_config = trigger_config(version.graph)
    before = old_config if old_type == WEBHOOK_TRIGGER else None
    after = new_config if new_type == WEBHOOK_TRIGGER else None
    if before != after:
        await audit.record(
            session,
            "webhook.settings",
            "webhook",
            wf.id,
            before=before,
            after=after,
            details={"version": version.number},
        )
