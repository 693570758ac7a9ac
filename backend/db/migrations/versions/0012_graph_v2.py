"""workflow graphs v2: steps pin their node-type version; Join steps carry their join

Stored graphs of schema 1 are rewritten once: every step gets ``type_version: 1`` (the
only version that existed when they were published), a ``control.join`` step gets its
``mode``/``count`` config as its ``join`` (what the engine used to re-read from the config
at run time; the engine now reads only ``join``), ``schema_version`` becomes 2, and the
content hash is recomputed the way ``designer_schema.graph.canonical_hash`` does (SHA-256
of the graph's JSON with sorted keys and ``content_hash`` blank), so an unchanged draft
still publishes as the same version.

Revision ID: 0012_graph_v2
Revises: 0007_audit_context
Create Date: 2026-12-01 08:30:00
"""

import hashlib
from typing import Any

import msgspec
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0012_graph_v2"
down_revision = "0007_audit_context"
branch_labels = None
depends_on = None

_JOIN = "control.join"
_MODES = ("all", "first", "n_of_m")


def _hash(graph: dict[str, Any]) -> str:
    blank = {**graph, "content_hash": ""}
    return hashlib.sha256(msgspec.json.encode(blank, order="sorted")).hexdigest()


def _config_join(config: dict[str, Any]) -> dict[str, Any]:
    """The join the engine derived from a Join node's config before graph schema 2."""
    mode = config.get("mode") if config.get("mode") in _MODES else "all"
    count = config.get("count") or 1
    return {"mode": mode, "count": count if isinstance(count, int) else 1}


def _upgrade(graph: dict[str, Any]) -> dict[str, Any]:
    steps = []
    for step in graph.get("steps") or []:
        step = {**step, "type_version": step.get("type_version", 1)}
        if step.get("type") == _JOIN:
            step["join"] = _config_join(step.get("config") or {})
        steps.append(step)
    upgraded = {**graph, "steps": steps, "schema_version": 2}
    upgraded["content_hash"] = _hash(upgraded)
    return upgraded


def _downgrade(graph: dict[str, Any]) -> dict[str, Any]:
    steps = []
    for step in graph.get("steps") or []:
        step = {k: v for k, v in step.items() if k != "type_version"}
        if step.get("type") == _JOIN:
            step["join"] = {"mode": "all", "count": 0}
        steps.append(step)
    downgraded = {**graph, "steps": steps, "schema_version": 1}
    downgraded["content_hash"] = _hash(downgraded)
    return downgraded


def _rewrite(change: Any, from_version: int) -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, graph FROM workflow_versions")).all()
    update = sa.text(
        "UPDATE workflow_versions SET graph = :graph, content_hash = :hash WHERE id = :id"
    ).bindparams(sa.bindparam("graph", type_=JSONB))
    for row in rows:
        graph = row.graph
        if not isinstance(graph, dict) or graph.get("schema_version", 1) != from_version:
            continue
        new = change(graph)
        bind.execute(update, {"graph": new, "hash": new["content_hash"], "id": row.id})


def upgrade() -> None:
    _rewrite(_upgrade, 1)


def downgrade() -> None:
    _rewrite(_downgrade, 2)
