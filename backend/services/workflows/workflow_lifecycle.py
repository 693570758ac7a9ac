"""Archive ("delete" in the UI), restore and duplicate workflows, each audited in its
transaction (:mod:`backend.services.workflows.workflow_audit`).

Archiving keeps everything: versions, runs (still listed, searchable and openable), grants,
the webhook token and secret. What stops:

- the workflow leaves the workflow lists and the workflow pickers;
- its webhook answers ``410 Gone`` (:func:`backend.services.triggers.webhooks.load_endpoint`);
- its schedule is disabled (:func:`backend.services.triggers.schedules.disable_schedule`), and so
  is its connector trigger (no poll, delivery or subscription; a hook registered at the
  vendor is deleted: :mod:`backend.services.triggers.events.subscriptions`);
- it starts no new runs: manual and API runs are refused (409), Sub-workflow and For each
  calls fail (the child is recorded as ``subworkflow_not_found``, the step as
  ``child_failed``), an error workflow is not started
  (``resolve_version`` skips archived workflows);
- its draft, settings and name cannot change until it is restored (409).

Runs in flight when it is archived finish on their pinned version. A workflow that is
another workflow's error workflow cannot be archived (409 naming those workflows).
Restoring (``manage`` on the workflow: its owner, a manage grant or an admin) brings the
webhook back and restarts the schedule of the active version from now.

Duplicating copies name (``"<name> (copy)"`` unless given), description, draft and
run-control settings into a new workflow owned by the caller, outside any project, with a
new webhook URL and no versions, runs, grants or webhook secret (set a new one).
"""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Permission, Principal, allows
from backend.db.models import Run, Workflow
from backend.services.errors import InvalidInput
from backend.services.identity import references
from backend.services.triggers import schedules
from backend.services.triggers.events import subscriptions
from backend.services.workflows import workflow_audit
from backend.services.workflows.workflows import (
    WorkflowInUse,
    WorkflowNotFound,
    active_version,
    new_webhook_token,
)

COPY_SUFFIX = " (copy)"
MAX_NAME = 200


class CreateNotAllowed(PermissionError):
    """The caller's role may not create workflows, so it may not duplicate one (403)."""


async def _locked(session: AsyncSession, workflow_id: uuid.UUID) -> Workflow:
    wf = (
        await session.execute(select(Workflow).where(Workflow.id == workflow_id).with_for_update())
    ).scalar_one_or_none()
    if wf is None:
        raise WorkflowNotFound(f"workflow {workflow_id} not found")
    return wf


async def archive_workflow(
    session: AsyncSession, workflow_id: uuid.UUID, user_id: uuid.UUID | None
) -> Workflow:
    """Archive a workflow (see the module docstring); archiving an archived workflow
    changes nothing. Raises :class:`WorkflowNotFound`, or :class:`WorkflowInUse` while an
    active workflow uses it as its error workflow."""
    wf = await _locked(session, workflow_id)
    if wf.archived_at is not None:
        return wf
    users = (
        await session.execute(
            select(Workflow.name).where(
                Workflow.settings["error_workflow_id"].astext == str(workflow_id),
                Workflow.archived_at.is_(None),
            )
        )
    ).scalars()
    names = sorted(users)
    if names:
        raise WorkflowInUse(
            "this workflow is the error workflow of "
            + ", ".join(repr(n) for n in names)
            + ": choose another error workflow there first"
        )
    wf.archived_at = datetime.now(UTC)
    wf.archived_by = user_id
    await schedules.disable_schedule(session, wf.id)
    await subscriptions.disable_subscription(session, wf.id, wf.archived_at)
    runs = (
        await session.execute(
            select(func.count()).select_from(Run).where(Run.workflow_id == workflow_id)
        )
    ).scalar_one()
    await session.flush()
    await workflow_audit.archived(session, wf, runs)
    return wf


async def restore_workflow(
    session: AsyncSession, workflow_id: uuid.UUID, triggers: dict[str, Any] | None = None
) -> Workflow:
    """Bring an archived workflow back (its schedule restarts from now, and its connector
    trigger, given the catalog's ``triggers`` by node type, from a new baseline); restoring
    an active workflow changes nothing. Raises :class:`WorkflowNotFound`."""
    wf = await _locked(session, workflow_id)
    if wf.archived_at is None:
        return wf
    wf.archived_at = None
    wf.archived_by = None
    await session.flush()
    version = await active_version(session, wf)
    if version is not None:
        now = datetime.now(UTC)
        await schedules.sync_schedule(session, wf.id, version.number, version.graph, now)
        await subscriptions.sync_subscription(
            session, wf.id, version.number, version.graph, now, triggers or {}
        )
    await workflow_audit.restored(session, wf)
    return wf


def copy_name(name: str) -> str:
    """``"Invoices"`` -> ``"Invoices (copy)"``, cut to fit :data:`MAX_NAME` characters."""
    return name[: MAX_NAME - len(COPY_SUFFIX)].rstrip() + COPY_SUFFIX


async def duplicate_workflow(
    session: AsyncSession,
    source_id: uuid.UUID,
    owner_id: uuid.UUID | None,
    *,
    name: str | None = None,
) -> Workflow:
    """A new workflow copied from ``source_id`` (see the module docstring), owned by
    ``owner_id``. An archived source can be copied too (the copy is active). Raises
    :class:`WorkflowNotFound`, or :class:`InvalidInput` for an empty or too long name."""
    source = await session.get(Workflow, source_id)
    if source is None:
        raise WorkflowNotFound(f"workflow {source_id} not found")
    new_name = copy_name(source.name) if name is None else name.strip()
    if not new_name:
        raise InvalidInput("name must not be empty", "name")
    if len(new_name) > MAX_NAME:
        raise InvalidInput(f"name must be at most {MAX_NAME} characters", "name")
    wf = Workflow(
        name=new_name,
        description=source.description,
        owner_id=owner_id,
        draft=copy.deepcopy(source.draft),
        settings=copy.deepcopy(source.settings or {}),
        webhook_token=new_webhook_token(),
    )
    session.add(wf)
    await session.flush()
    await workflow_audit.duplicated(session, wf, source)
    return wf


async def duplicate_as(
    session: AsyncSession,
    principal: Principal,
    source_id: uuid.UUID,
    user_id: uuid.UUID,
    catalog: Any,
    *,
    name: str | None = None,
) -> Workflow:
    """:func:`duplicate_workflow` on behalf of ``principal`` (who may read the source: the
    route's guard checked that): raises :class:`CreateNotAllowed` when its role may not
    create workflows, and :class:`~backend.services.identity.references.ReferenceNotGranted` when
    the draft names a credential or workflow, or the settings an error workflow, it may
    not use (a copy must not hand its author what it could not pick itself)."""
    if not allows(principal, Permission.WORKFLOW_CREATE):
        raise CreateNotAllowed("you may not create workflows")
    source = await session.get(Workflow, source_id)
    if source is None:
        raise WorkflowNotFound(f"workflow {source_id} not found")
    await references.check_diagram(session, principal, source.draft, catalog)
    error_workflow = (source.settings or {}).get("error_workflow_id")
    await references.check_called_workflow(session, principal, error_workflow, "error_workflow_id")
    return await duplicate_workflow(session, source_id, user_id, name=name)


__all__ = [
    "CreateNotAllowed",
    "archive_workflow",
    "copy_name",
    "duplicate_as",
    "duplicate_workflow",
    "restore_workflow",
]
