"""Compiled graphs of workflow versions, decoded once and cached (versions are immutable).

The stored JSON is read as text and decoded straight into the graph's structs
(:func:`designer_schema.graph.graph_from_json`): decoding it into dicts first (the jsonb
codec) and converting those cost about twice the time on the event loop, ~0.2 s for a
5,000-step graph on the 2-core test machine under load, once per process and version.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

from sqlalchemy import Text, cast, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import WorkflowVersion
from designer_schema.graph import WorkflowGraph, graph_from_json

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
        await session.execute(
            select(cast(WorkflowVersion.graph, Text)).where(WorkflowVersion.id == version_id)
        )
    ).scalar_one_or_none()
    if raw is None:
        raise LookupError(f"workflow version {version_id} not found")
    graph = graph_from_json(raw)
    _CACHE[version_id] = graph
    if len(_CACHE) > _MAX:
        _CACHE.popitem(last=False)
    return graph
