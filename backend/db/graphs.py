"""Compiled graphs of workflow versions, decoded once and cached (versions are immutable)."""

from __future__ import annotations

import uuid
from collections import OrderedDict

import msgspec
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import WorkflowVersion
from designer_schema.graph import WorkflowGraph

_CACHE: OrderedDict[uuid.UUID, WorkflowGraph] = OrderedDict()
_MAX = 512


def cached_graph(version_id: uuid.UUID) -> WorkflowGraph | None:
    """The graph of ``version_id`` when it is already cached (no I/O)."""
    return _CACHE.get(version_id)


async def graph_for_version(session: AsyncSession, version_id: uuid.UUID) -> WorkflowGraph:
    """Return the graph of ``version_id``; raises ``LookupError`` when the version is gone."""
    graph = _CACHE.get(version_id)
    if graph is not None:
        _CACHE.move_to_end(version_id)
        return graph
    raw = (
        await session.execute(select(WorkflowVersion.graph).where(WorkflowVersion.id == version_id))
    ).scalar_one_or_none()
    if raw is None:
        raise LookupError(f"workflow version {version_id} not found")
    graph = msgspec.convert(raw, WorkflowGraph)
    _CACHE[version_id] = graph
    if len(_CACHE) > _MAX:
        _CACHE.popitem(last=False)
    return graph
