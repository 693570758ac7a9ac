"""Migration 0012 on real PostgreSQL: stored schema-1 graphs become what the compiler makes.

A database of its own (created in the test server) is migrated to the revision before,
given a workflow version whose graph was stored the old way (no pinned node-type versions,
the Join's mode only in its config), then migrated to the head.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from alembic import command
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from backend.db.migrate import alembic_config
from designer_schema.graph import JoinSpec, canonical_hash, graph_from_json
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import compile_dict

pytestmark = pytest.mark.integration

BEFORE = "0007_audit_context"


@pytest_asyncio.fixture
async def scratch_url(pg_url: str) -> AsyncIterator[str]:
    """A fresh, empty database in the test server (dropped afterwards)."""
    name = f"mig_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(pg_url, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'create database "{name}"'))
    try:
        yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'drop database "{name}" with (force)'))
        await admin.dispose()


def _join_workflow() -> dict[str, Any]:
    return diagram(
        [
            node("start", "trigger.manual"),
            node("a", "test.action"),
            node("b", "test.action"),
            node("join", "control.join", mode="first"),
        ],
        [edge("start", "a"), edge("start", "b"), edge("a", "join"), edge("b", "join")],
    )


def _schema_1(raw: dict[str, Any]) -> dict[str, Any]:
    """A compiled graph as stored before graph schema 2 (and its hash of then)."""
    for step in raw["steps"]:
        del step["type_version"]
        if step["type"] == "control.join":
            step["join"] = {"mode": "all", "count": 0}
    raw["schema_version"] = 1
    return raw


async def test_migration_0012_pins_versions_compiles_joins_and_keeps_hashes_true(
    scratch_url: str,
) -> None:
    cfg = alembic_config(scratch_url)
    await asyncio.to_thread(command.upgrade, cfg, BEFORE)
    compiled = compile_dict(_join_workflow())
    old = _schema_1(msgspec.to_builtins(compiled))
    db = create_async_engine(scratch_url)
    wf_id, version_id = uuid.uuid4(), uuid.uuid4()
    insert_version = text(
        "insert into workflow_versions (id, workflow_id, number, diagram, graph, content_hash)"
        " values (:id, :wf, 1, '{}'::jsonb, :graph, 'old-hash')"
    ).bindparams(bindparam("graph", type_=JSONB))
    async with db.begin() as conn:
        await conn.execute(
            text(
                "insert into workflows (id, name, description, draft, webhook_token)"
                " values (:id, 'w', '', '{}'::jsonb, :token)"
            ),
            {"id": wf_id, "token": uuid.uuid4().hex},
        )
        await conn.execute(insert_version, {"id": version_id, "wf": wf_id, "graph": old})
    select_version = text("select graph, content_hash from workflow_versions where id = :id")

    await asyncio.to_thread(command.upgrade, cfg, "head")
    async with db.connect() as conn:
        graph_json, stored_hash = (await conn.execute(select_version, {"id": version_id})).one()
    loaded = graph_from_json(msgspec.json.encode(graph_json), verify_hash=True)
    assert loaded.schema_version == 2
    assert [s.type_version for s in loaded.steps] == [1, 1, 1, 1]
    assert loaded.step("join").join == JoinSpec(mode="first", count=1)
    assert loaded == compiled
    assert stored_hash == loaded.content_hash == canonical_hash(compiled)

    await asyncio.to_thread(command.downgrade, cfg, BEFORE)
    async with db.connect() as conn:
        graph_json, _ = (await conn.execute(select_version, {"id": version_id})).one()
    assert graph_json["schema_version"] == 1
    assert all("type_version" not in step for step in graph_json["steps"])
    await db.dispose()
