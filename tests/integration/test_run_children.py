"""A run's children (step records, attempts, events) without a foreign key to ``runs``
(migration 0025_run_children_fk) on real PostgreSQL: every way runs are deleted removes
their children through the statement trigger ``runs_delete_children``; a child insert
whose run is gone writes nothing; a delete that waits for a transaction writing children
removes what that transaction committed; outbox events of no run stay allowed."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.run_store import PgRunStore
from backend.db.run_transaction import PgRunTransaction
from backend.db.run_writes import write_state
from backend.engine.model import RunState
from backend.engine.states import RunStatus
from backend.runtime import Runtime
from backend.services.identity import references
from backend.services.operations import retention
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, start_manual
from tests.integration.retention_rows import age_runs, by_class, rules

pytestmark = pytest.mark.integration

CHILDREN = ("step_runs", "attempts", "events")


def _templates() -> dict[str, Any]:
    """Manual trigger -> two Text template action steps (each one attempt)."""
    return diagram(
        [
            node("start", "trigger.manual"),
            node("s1", "data.template", template="a{{ input.i }}"),
            node("s2", "data.template", template="{{ input.text }}b"),
        ],
        [edge("start", "s1"), edge("s1", "s2")],
    )


async def _runs(client: httpx.AsyncClient, runtime: Runtime, count: int) -> tuple[str, list[str]]:
    """A published two-step workflow and ``count`` of its runs, succeeded."""
    wf = await publish(client, _templates())
    ids = [await start_manual(client, wf, {"i": i}) for i in range(count)]
    for run_id in ids:
        assert await wait_for_run(runtime, run_id) == "succeeded"
    return str(wf["id"]), ids


async def _children(runtime: Runtime, run_ids: list[str]) -> dict[str, int]:
    """Rows per child table of runs ``run_ids``."""
    ids = [uuid.UUID(i) for i in run_ids]
    async with runtime.engine.connect() as conn:
        return {
            table: int(
                (
                    await conn.execute(
                        text(f"select count(*) from {table} where run_id = any(:ids)"),
                        {"ids": ids},
                    )
                ).scalar_one()
            )
            for table in CHILDREN
        }


async def test_run_children_have_no_foreign_key_and_a_delete_trigger(runtime: Runtime) -> None:
    async with runtime.engine.connect() as conn:
        keys = (
            await conn.execute(
                text(
                    "select conrelid::regclass::text from pg_constraint"
                    " where contype = 'f' and confrelid = 'runs'::regclass"
                )
            )
        ).scalars()
        trigger = (
            await conn.execute(
                text(
                    "select action_timing, action_orientation, action_reference_old_table"
                    " from information_schema.triggers"
                    " where trigger_name = 'runs_delete_children'"
                )
            )
        ).one()
    assert not set(CHILDREN) & set(keys)
    assert tuple(trigger) == ("AFTER", "STATEMENT", "gone")


async def test_retention_deletes_runs_with_step_records_attempts_and_events(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    _, ids = await _runs(client, runtime, 3)
    before = await _children(runtime, ids)
    assert all(before[table] > 0 for table in CHILDREN), before
    await age_runs(runtime, {ids[0]: 100, ids[1]: 100})
    results = by_class(
        await retention.run_pass(
            runtime.sessionmaker, rules(settings, retention_runs_days=90, retention_batch=1)
        )
    )
    assert results["runs"].deleted == 2
    assert await _children(runtime, ids[:2]) == dict.fromkeys(CHILDREN, 0)
    kept = await _children(runtime, ids[2:])
    assert all(kept[table] > 0 for table in CHILDREN), kept


async def test_deleting_workflows_deletes_their_runs_and_the_runs_children(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """The cascade from ``workflows`` to ``runs`` fires the runs' trigger too, also when
    one statement deletes several workflows (one cascaded delete each)."""
    first, first_runs = await _runs(client, runtime, 2)
    second, second_runs = await _runs(client, runtime, 1)
    kept, kept_runs = await _runs(client, runtime, 1)
    async with runtime.engine.begin() as conn:
        await conn.execute(
            text("delete from workflows where id = any(:ids)"),
            {"ids": [uuid.UUID(first), uuid.UUID(second)]},
        )
        left = (await conn.execute(text("select workflow_id from runs"))).scalars().all()
    assert [str(w) for w in left] == [kept]
    assert await _children(runtime, first_runs + second_runs) == dict.fromkeys(CHILDREN, 0)
    assert all(n > 0 for n in (await _children(runtime, kept_runs)).values())


async def test_child_inserts_of_a_deleted_run_write_nothing(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """Every writer of a run's children is guarded by its run: once the run is deleted,
    the transition write, an event, a seeded step and copied steps insert nothing."""
    wf, (source, gone) = await _runs(client, runtime, 2)
    async with runtime.engine.begin() as conn:
        await conn.execute(text("delete from runs where id = :id"), {"id": uuid.UUID(gone)})
    store = PgRunStore(runtime.sessionmaker, refusal=references.called_workflow_refusal)
    gone_id = uuid.UUID(gone)
    async with store.transaction() as tx:
        await tx.add_event(gone_id, "run.created", {"trigger": "manual"})
        await tx.seed_step(gone_id, "s1", {"x": 1})
        await tx.copy_steps(uuid.UUID(source), gone_id, ["s1", "s2"])
    state = RunState(gone, wf, 1, RunStatus.RUNNING, {}, {})
    state.step("late")
    state.changed.add("late")
    state.emit("step.started", "late")
    written = await write_state(store.fast, gone_id, state)
    assert written.revision is None and written.moved
    assert await _children(runtime, [gone]) == dict.fromkeys(CHILDREN, 0)


async def test_a_run_delete_waiting_for_a_child_writer_removes_what_it_committed(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """A transaction holding the run (locked, as the engine does) writes children while a
    delete of the run waits for it: once it commits, the delete goes on and its trigger's
    new snapshot sees and deletes the committed children."""
    _, (run_id,) = await _runs(client, runtime, 1)
    rid = uuid.UUID(run_id)

    async def delete(conn: AsyncConnection) -> int:
        res = await conn.execute(text("delete from runs where id = :id"), {"id": rid})
        return int(res.rowcount)

    async with runtime.sessionmaker() as session:
        tx = PgRunTransaction(session, references.called_workflow_refusal)
        assert await tx.lock(rid) is not None
        await tx.add_event(rid, "run.note", {"late": True})
        await tx.seed_step(rid, "late_step", {"late": True})
        async with runtime.engine.begin() as conn:
            waiting = asyncio.ensure_future(delete(conn))
            await _until_blocked(runtime)
            assert not waiting.done()
            await session.commit()
            assert await waiting == 1
    assert await _children(runtime, [run_id]) == dict.fromkeys(CHILDREN, 0)


async def _until_blocked(runtime: Runtime) -> None:
    """Return once some backend waits for a lock (the delete behind the run lock)."""
    async with runtime.engine.connect() as conn:
        for _ in range(500):
            waiting = (
                await conn.execute(
                    text(
                        "select count(*) from pg_stat_activity"
                        " where wait_event_type = 'Lock' and query like 'delete from runs%'"
                    )
                )
            ).scalar_one()
            if waiting:
                return
            await asyncio.sleep(0.01)
    raise AssertionError("the delete never waited for the run lock")


async def test_outbox_events_of_no_run_stay_allowed(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    _, ids = await _runs(client, runtime, 1)
    async with runtime.engine.begin() as conn:
        await conn.execute(text("insert into events (run_id, kind, data) values (null, 'x', '{}')"))
        await conn.execute(text("delete from runs"))
        left = (await conn.execute(text("select run_id, kind from events"))).all()
    assert [tuple(r) for r in left] == [(None, "x")]
    assert await _children(runtime, ids) == dict.fromkeys(CHILDREN, 0)
