"""Pinned data: sample output stored with a workflow's draft, per node, for test runs.

Pinning data on a step makes test runs use it as the step's output instead of executing
the step (backend/services/workflows/pinned_graph.py); pinned data on the trigger is a test run's
input. Published runs never see pinned data. Stored in ``workflows.pinned_data`` as
``{node_id: {"data": ..., "pinned_at": time, "pinned_by": user id or null}}`` (``pinned_at``
RFC 3339 UTC ending ``Z``; rows pinned before end ``+00:00`` and are answered ending ``Z``);
every change is audited (``workflow.pin``, ``workflow.unpin``).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Workflow
from backend.services import audit
from backend.services.errors import InvalidInput
from backend.services.timestamps import rfc3339, rfc3339_text
from backend.services.workflows.workflows import WorkflowNotFound, check_json_limit

PIN_MAX_BYTES = 1024 * 1024
"""Largest pinned value, as JSON text (bytes); larger pins are refused with 400."""


class Pin(msgspec.Struct):
    """Data pinned on one node: ``data`` (any JSON), when (RFC 3339 UTC ending ``Z``) and by
    whom (user id)."""

    node_id: str
    data: Any
    pinned_at: str
    pinned_by: str | None = None


def pins_of(wf: Workflow) -> dict[str, Pin]:
    """The pins stored on ``wf``, by node id."""
    stored = wf.pinned_data or {}
    return {
        node_id: Pin(
            node_id,
            entry.get("data"),
            rfc3339_text(str(entry.get("pinned_at", ""))),
            entry.get("pinned_by"),
        )
        for node_id, entry in stored.items()
        if isinstance(entry, dict)
    }


def pinned_values(wf: Workflow) -> dict[str, Any]:
    """Node id -> pinned data of ``wf`` (what a test run substitutes)."""
    return {node_id: pin.data for node_id, pin in pins_of(wf).items()}


async def _locked(session: AsyncSession, workflow_id: uuid.UUID) -> Workflow:
    wf = (
        await session.execute(select(Workflow).where(Workflow.id == workflow_id).with_for_update())
    ).scalar_one_or_none()
    if wf is None:
        raise WorkflowNotFound(f"workflow {workflow_id} not found")
    return wf


def _draft_node_ids(wf: Workflow) -> set[str]:
    return {str(n.get("id")) for n in (wf.draft or {}).get("nodes", []) if isinstance(n, dict)}


async def pin(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    node_id: str,
    data: Any,
    *,
    user_id: uuid.UUID | None,
    max_json_depth: int,
) -> Pin:
    """Pin ``data`` on node ``node_id`` of the saved draft (replacing an earlier pin).

    Raises :class:`WorkflowNotFound`, or :class:`InvalidInput` when the node is not in the
    saved draft (``node_id``), or ``data`` is over :data:`PIN_MAX_BYTES` or nests deeper
    than ``max_json_depth`` (``data``).
    """
    wf = await _locked(session, workflow_id)
    if node_id not in _draft_node_ids(wf):
        raise InvalidInput(f"node {node_id!r} is not in the saved draft", "node_id")
    check_json_limit(data, max_json_depth, "data")
    size = len(msgspec.json.encode(data))
    if size > PIN_MAX_BYTES:
        raise InvalidInput(
            f"pinned data is {size} bytes; at most {PIN_MAX_BYTES} bytes can be pinned", "data"
        )
    entry = {
        "data": data,
        "pinned_at": rfc3339(datetime.now(UTC)),
        "pinned_by": str(user_id) if user_id else None,
    }
    before = (wf.pinned_data or {}).get(node_id)
    wf.pinned_data = {**(wf.pinned_data or {}), node_id: entry}
    await audit.record(
        session,
        "workflow.pin",
        "workflow",
        wf.id,
        actor_user_id=user_id,
        before=before,
        after=entry,
        details={"node_id": node_id},
    )
    await session.flush()
    return pins_of(wf)[node_id]


async def unpin(session: AsyncSession, workflow_id: uuid.UUID, node_id: str) -> bool:
    """Remove the pin of ``node_id``; False when it had none. Raises :class:`WorkflowNotFound`."""
    wf = await _locked(session, workflow_id)
    stored = dict(wf.pinned_data or {})
    before = stored.pop(node_id, None)
    if before is None:
        return False
    wf.pinned_data = stored
    await audit.record(
        session, "workflow.unpin", "workflow", wf.id, before=before, details={"node_id": node_id}
    )
    await session.flush()
    return True
