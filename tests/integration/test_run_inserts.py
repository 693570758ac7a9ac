"""Run inserts grouped (backend/db/run_inserts.py): concurrent one-statement starts share
statements and commits, yet every run is stored whole (step records, events in emit
order), a taken idempotency key fails only its own start, and SQL NULLs stay NULLs;
queued runs (children) are inserted in chunks of statements with their shared part
stored once."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import event, text

from backend.db import payloads, run_inserts
from backend.db.run_inserts import insert_queued_runs, insert_run
from backend.db.run_state import active_version_of
from backend.db.run_store import PgRunStore
from backend.engine.ports import NewRun
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


def _set_if() -> dict[str, Any]:
    """start -> shape (Set) -> check (If): a run that ends in its start."""
    return diagram(
        [
            node("start", "trigger.manual"),
            node("shape", "control.set", mapping={"n": "=$.n"}),
            node("check", "control.if", condition="=$.n > 5"),
        ],
        [edge("start", "shape"), edge("shape", "check")],
    )


async def _version(client: httpx.AsyncClient, runtime: Runtime) -> Any:
    wf = await publish(client, _set_if())
    async with runtime.sessionmaker() as session:
        version = await active_version_of(session, uuid.UUID(wf["id"]))
    assert version is not None
    return version


async def test_concurrent_starts_share_statements_and_each_run_is_whole(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    version = await _version(client, runtime)
    store = runtime.execution.env.store
    assert isinstance(store, PgRunStore)
    groups = store.inserts.groups
    before = (groups.groups, groups.items)
    started = await asyncio.gather(
        *(runtime.execution.start_run(version, {"n": i}, trigger="manual") for i in range(40))
    )
    assert {s.status for s in started} == {"succeeded"}
    written = groups.items - before[1]
    statements = groups.groups - before[0]
    assert written == 40
    assert statements < 40  # grouped: at most 2 in flight while the others waited
    ids = [s.run_id for s in started]
    async with runtime.sessionmaker() as session:
        runs = dict(
            (
                await session.execute(
                    text("SELECT id, (output->'n')::int FROM runs WHERE id = ANY(:ids)"),
                    {"ids": ids},
                )
            ).all()
        )
        steps = (
            await session.execute(
                text(
                    "SELECT run_id, count(*) FROM step_runs WHERE run_id = ANY(:ids) "
                    "GROUP BY run_id"
                ),
                {"ids": ids},
            )
        ).all()
        events = (
            await session.execute(
                text("SELECT run_id, kind FROM events WHERE run_id = ANY(:ids) ORDER BY id"),
                {"ids": ids},
            )
        ).all()
    assert [runs[run_id] for run_id in ids] == list(range(40))
    assert {count for _, count in steps} == {3} and len(steps) == 40
    per_run: dict[uuid.UUID, list[str]] = {}
    for run_id, kind in events:
        per_run.setdefault(run_id, []).append(kind)
    for kinds in per_run.values():  # emit order within each run
        assert kinds[0] == "run.created" and kinds[-1] == "run.succeeded"


async def test_a_taken_idempotency_key_fails_only_its_own_start(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    version = await _version(client, runtime)
    key = f"grouped:{uuid.uuid4()}"
    keys = [key if i in (3, 7) else None for i in range(12)]
    started = await asyncio.gather(
        *(
            runtime.execution.start_run(version, {"n": i}, trigger="api", idempotency_key=k)
            for i, k in enumerate(keys)
        )
    )
    keyed = [started[3], started[7]]
    assert sorted(s.created for s in keyed) == [False, True]
    assert keyed[0].run_id == keyed[1].run_id  # the replay returns the stored run
    others = [s for i, s in enumerate(started) if i not in (3, 7)]
    assert all(s.created and s.status == "succeeded" for s in others)
    async with runtime.sessionmaker() as session:
        stored = (
            await session.execute(
                text("SELECT count(*) FROM runs WHERE id = ANY(:ids)"),
                {"ids": [s.run_id for s in started]},
            )
        ).scalar_one()
    assert stored == 11


async def test_a_queued_insert_keeps_sql_nulls(client: httpx.AsyncClient, runtime: Runtime) -> None:
    """Values carried as JSON ``null`` in the ``:runs`` array are SQL NULL in the row."""
    version = await _version(client, runtime)
    new = NewRun(
        id=uuid.uuid4(),
        workflow_id=version.workflow_id,
        version_id=version.id,
        version_number=version.number,
        trigger="manual",
        input=None,
    )
    async with runtime.sessionmaker() as session, session.begin():
        done = await insert_run(session, new)
        again = await insert_run(session, new)  # the same id: left alone
    assert done.written and done.revision is not None
    assert not again.written and not again.settings_differ
    async with runtime.sessionmaker() as session:
        row = (
            await session.execute(
                text(
                    "SELECT status, input IS NULL, output IS NULL, error IS NULL, "
                    "response IS NULL, started_at IS NULL, created_at IS NOT NULL "
                    "FROM runs WHERE id = :id"
                ),
                {"id": new.id},
            )
        ).one()
    assert tuple(row) == ("queued", True, True, True, True, True, True)


async def test_queued_runs_are_inserted_in_chunks_with_their_shared_part_once(
    client: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Children of one step: a statement per chunk (not per run), every run whole and in
    order, the shared parent input one payload referenced by every child; inserting the
    same ids again writes nothing."""
    monkeypatch.setattr(run_inserts, "QUEUED_CHUNK", 40)
    version = await _version(client, runtime)
    shared = [{"n": i, "pad": "x" * 20} for i in range(200)]  # ~6 kB: stored by reference
    parent = uuid.uuid4()
    parent_run = NewRun(
        id=parent,
        workflow_id=version.workflow_id,
        version_id=version.id,
        version_number=version.number,
        trigger="manual",
        input=None,
    )
    news = [
        NewRun(
            id=uuid.uuid4(),
            workflow_id=version.workflow_id,
            version_id=version.id,
            version_number=version.number,
            trigger="subworkflow",
            input={"item": shared[i], "index": i, "input": shared},
            parent_run_id=parent,
            parent_step_id="loop",
            parent_index=i,
            by_reference=(shared,),
        )
        for i in range(100)
    ]
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "INSERT INTO runs" in statement:
            statements.append(statement)

    sync_engine = runtime.engine.sync_engine
    event.listen(sync_engine, "before_cursor_execute", count)
    try:
        async with runtime.sessionmaker() as session, session.begin():
            await insert_run(session, parent_run)
            written = await insert_queued_runs(session, news)
            again = await insert_queued_runs(session, news)
    finally:
        event.remove(sync_engine, "before_cursor_execute", count)
    assert written == [True] * 100 and again == [False] * 100
    assert len(statements) == 7  # the parent, then 100 runs in chunks of 40, twice
    async with runtime.sessionmaker() as session:
        rows = (
            await session.execute(
                text(
                    "SELECT parent_index, status, input->'input' FROM runs "
                    "WHERE parent_run_id = :p ORDER BY parent_index"
                ),
                {"p": parent},
            )
        ).all()
    assert [r[0] for r in rows] == list(range(100))
    assert {r[1] for r in rows} == {"queued"}
    references = {str(r[2]) for r in rows}
    assert len(references) == 1 and payloads.MARKER in next(iter(references))
