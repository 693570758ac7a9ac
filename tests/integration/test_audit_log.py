"""The audit log is append-only in PostgreSQL; retention deletes only old rows, through
``audit_log_purge``, applied by the scheduler."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from sqlalchemy import text

from backend.runtime import Runtime, build_runtime
from backend.services import audit
from backend.services.identity import accounts
from backend.services.operations import audit_log
from backend.settings import Settings
from backend.workers.scheduler import run_scheduler
from tests.integration.audit_rows import add_row, refused

pytestmark = pytest.mark.integration


async def test_audit_log_refuses_update_delete_and_truncate(runtime: Runtime) -> None:
    row_id = await add_row(runtime)
    old_id = await add_row(runtime, age_days=4000)
    assert "append-only: UPDATE refused" in await refused(
        runtime, f"update audit_log set action = 'x.y' where id = {row_id}"
    )
    assert "append-only: UPDATE refused" in await refused(
        runtime, f"update audit_log set after = '{{}}' where id = {row_id}"
    )
    assert "append-only: DELETE refused" in await refused(
        runtime, f"delete from audit_log where id = {old_id}"
    )
    assert "append-only: TRUNCATE refused" in await refused(runtime, "truncate audit_log")
    async with runtime.engine.connect() as conn:
        count = (await conn.execute(text("select count(*) from audit_log"))).scalar_one()
    assert count == 2


async def test_deleting_a_user_keeps_their_audit_rows(runtime: Runtime) -> None:
    async with runtime.sessionmaker() as session, session.begin():
        user = await accounts.create_user(session, "gone@example.com", "long enough pw 1")
        await audit.record(
            session,
            "workflow.create",
            "workflow",
            "w1",
            actor_user_id=user.id,
            actor_label=user.email,
        )
    async with runtime.engine.begin() as conn:
        await conn.execute(text("delete from users where email = 'gone@example.com'"))
    async with runtime.engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "select actor_user_id, actor_label from audit_log"
                    " where action = 'workflow.create'"
                )
            )
        ).one()
    assert row == (None, "gone@example.com")


async def test_purge_deletes_only_rows_older_than_the_retention(runtime: Runtime) -> None:
    old = await add_row(runtime, age_days=400)
    recent = await add_row(runtime, age_days=10)
    async with runtime.sessionmaker() as session, session.begin():
        assert await audit_log.purge_expired(session, 0) == 0  # 0 keeps everything
        assert await audit_log.purge_expired(session, 365) == 1
    async with runtime.engine.connect() as conn:
        rows = dict(
            (await conn.execute(text("select id, action from audit_log order by id"))).all()
        )
    assert old not in rows and rows[recent] == "workflow.create"
    purge = [action for action in rows.values() if action == "audit.purge"]
    assert purge == ["audit.purge"]
    # after the purge the setting is cleared: recent rows are protected again
    assert "DELETE refused" in await refused(runtime, f"delete from audit_log where id = {recent}")
    assert "at least 1" in await refused(runtime, "select audit_log_purge(0)")


async def test_audit_retention_is_applied_by_the_scheduler(
    settings: Settings, runtime: Runtime
) -> None:
    old = await add_row(runtime, age_days=31)
    kept = await add_row(runtime, age_days=29)
    scheduler = await build_runtime(msgspec.structs.replace(settings, audit_retention_days=30))
    stop = asyncio.Event()
    task = asyncio.create_task(run_scheduler(scheduler, stop))
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=20)
        while datetime.now(UTC) < deadline:
            async with runtime.engine.connect() as conn:
                ids = set((await conn.execute(text("select id from audit_log"))).scalars())
            if old not in ids:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await task
        await scheduler.close()
    assert old not in ids and kept in ids
    async with runtime.engine.connect() as conn:
        details = (
            await conn.execute(text("select details from audit_log where action = 'audit.purge'"))
        ).scalar_one()
    assert details == {"deleted": 1, "keep_days": 30}
