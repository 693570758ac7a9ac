"""Every migration has a working downgrade: upgrade to head, downgrade to base and
upgrade again on an empty database (docs/operations.md, "Zero-downtime upgrades")."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
from alembic import command

from backend.db.migrate import alembic_config
from backend.embedded import EmbeddedPostgres
from backend.services.runs.runs import start_key

pytestmark = pytest.mark.integration


def _tables(pg_server: EmbeddedPostgres, database: str) -> set[str]:
    async def read() -> set[str]:
        conn = await asyncpg.connect(pg_server.dsn_for(database))
        try:
            rows = await conn.fetch("select tablename from pg_tables where schemaname = 'public'")
            return {r["tablename"] for r in rows}
        finally:
            await conn.close()

    return asyncio.run(read())


def test_every_migration_downgrades_and_upgrades_again(pg_server: EmbeddedPostgres) -> None:
    database = f"migrations_{uuid.uuid4().hex[:10]}"
    pg_server.create_database(database)
    cfg = alembic_config(pg_server.url_for(database))
    command.upgrade(cfg, "head")
    upgraded = _tables(pg_server, database)
    assert {"workflows", "runs", "credentials"} <= upgraded
    command.downgrade(cfg, "base")
    assert _tables(pg_server, database) == {"alembic_version"}
    command.upgrade(cfg, "head")
    assert _tables(pg_server, database) == upgraded


def test_scoped_start_keys_hash_as_the_api_does(pg_server: EmbeddedPostgres) -> None:
    """Migration 0033 rewrites stored start keys with PostgreSQL's ``sha256`` of the key's
    UTF-8 bytes: the same text :func:`backend.services.runs.runs.start_key` stores."""
    workflow_id = uuid.uuid4()
    key = "order-4711-\u00e9\u20ac"

    async def scoped() -> str:
        conn = await asyncpg.connect(pg_server.dsn_for("postgres"))
        try:
            return str(
                await conn.fetchval(
                    "select 'api:' || $1::uuid::text || ':'"
                    " || encode(sha256(convert_to($2::text, 'UTF8')), 'hex')",
                    workflow_id,
                    key,
                )
            )
        finally:
            await conn.close()

    assert asyncio.run(scoped()) == start_key(workflow_id, key)


def test_events_created_index_leaves_the_last_range_unsummarized(
    pg_server: EmbeddedPostgres,
) -> None:
    """Migration 0034 builds ``ix_events_created`` as a BRIN index and hands the range the
    next events go to back to the unsummarized state: ``brin_summarize_range`` finds one
    range to summarize there (0 had ``CREATE INDEX``'s summary been kept, and every event
    would then rewrite it)."""
    database = f"brin_{uuid.uuid4().hex[:10]}"
    pg_server.create_database(database)
    command.upgrade(alembic_config(pg_server.url_for(database)), "head")

    async def summarized() -> tuple[str, int]:
        conn = await asyncpg.connect(pg_server.dsn_for(database))
        try:
            method = await conn.fetchval(
                "select am.amname from pg_class c join pg_am am on am.oid = c.relam"
                " where c.relname = 'ix_events_created'"
            )
            await conn.execute("insert into events (kind, data) values ('probe', '{}')")
            ranges = await conn.fetchval("select brin_summarize_range('ix_events_created', 0)")
            return str(method), int(ranges)
        finally:
            await conn.close()

    assert asyncio.run(summarized()) == ("brin", 1)
