"""Unlocked engine writes grouped (``RunWrites``, backend/db/run_writes.py): writes of
different runs made at the same moment share a statement, each still fenced by its own
run's revision and its own attempt's fencing token; two writes of one run in a group
write once (the other finds the run moved, as after the first's commit)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.db.run_store import PgRunStore
from backend.engine.ports import FinishedAttempt, Written
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish

pytestmark = pytest.mark.integration

UNREACHED = "http://127.0.0.1:9/never-called"  # no worker runs the step


async def _runs(client: httpx.AsyncClient, runtime: Runtime, count: int) -> list[uuid.UUID]:
    """``count`` runs of start -> s0 (an HTTP step no worker runs), no job left queued."""
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("s0", "http.request", method="POST", url=UNREACHED),
            ],
            [edge("start", "s0")],
        ),
    )
    ids = []
    for i in range(count):
        r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"i": i}})
        assert r.status_code in (200, 201, 202), r.text
        ids.append(uuid.UUID(r.json()["run_id"]))
    await runtime.redis.flushall()  # no worker: the test writes itself
    return ids


def _store(runtime: Runtime) -> PgRunStore:
    store = runtime.execution.env.store
    assert isinstance(store, PgRunStore)
    return store


async def _decided(store: PgRunStore, run_id: uuid.UUID, mark: str) -> tuple[Any, int]:
    """Run ``run_id`` read unlocked with one event ``mark`` added: (state, revision)."""
    read = await store.read_unlocked(run_id)
    assert read is not None
    row, state = read
    state.emit("test.mark", mark=mark)
    return state, row.revision


async def _writes(
    store: PgRunStore,
    marks: list[tuple[uuid.UUID, str]],
    finish: dict[uuid.UUID, FinishedAttempt] | None = None,
) -> list[Written]:
    """Every ``(run, mark)`` decided first, then all written at the same moment."""
    decided = [await _decided(store, run_id, mark) for run_id, mark in marks]
    return list(
        await asyncio.gather(
            *(
                store.writes.write(
                    run_id,
                    state,
                    finish=(finish or {}).get(run_id),
                    start=None,
                    expected_revision=revision,
                )
                for (run_id, _), (state, revision) in zip(marks, decided, strict=True)
            )
        )
    )


async def _marks(runtime: Runtime, ids: list[uuid.UUID]) -> dict[uuid.UUID, list[Any]]:
    async with runtime.sessionmaker() as session:
        rows = (
            await session.execute(
                text(
                    "SELECT run_id, data->>'mark' FROM events "
                    "WHERE kind = 'test.mark' AND run_id = ANY(:ids) ORDER BY id"
                ),
                {"ids": ids},
            )
        ).all()
    found: dict[uuid.UUID, list[Any]] = {run_id: [] for run_id in ids}
    for run_id, mark in rows:
        found[run_id].append(mark)
    return found


async def test_writes_of_different_runs_share_statements(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    ids = await _runs(client, runtime, 12)
    store = _store(runtime)
    before = (store.writes.groups.groups, store.writes.groups.items)
    written = await _writes(store, [(run_id, str(run_id)) for run_id in ids])
    assert all(w.revision is not None for w in written)
    assert store.writes.groups.items - before[1] == 12
    assert store.writes.groups.groups - before[0] < 12
    assert await _marks(runtime, ids) == {run_id: [str(run_id)] for run_id in ids}


async def test_two_writes_of_one_run_write_once(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """Both decided from the same revision: the first is written, the second is told the
    run moved (nothing of it written), whether or not they shared a group."""
    other, run_id = await _runs(client, runtime, 2)
    store = _store(runtime)
    first, second, third = await _writes(store, [(other, "other"), (run_id, "a"), (run_id, "b")])
    assert first.revision is not None
    assert (second.revision is None) != (third.revision is None)
    lost = second if second.revision is None else third
    assert lost.moved
    marks = await _marks(runtime, [run_id, other])
    assert marks[other] == ["other"] and len(marks[run_id]) == 1


async def test_a_stale_fencing_token_refuses_only_its_own_write(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    ids = await _runs(client, runtime, 4)
    claimed = await runtime.execution.steps.claim(ids[0], "s0")
    assert claimed is not None
    stale = FinishedAttempt(
        id=claimed.attempt_id,
        fencing_token="not-the-token",
        status="succeeded",
        output={},
        error=None,
        finished_at=datetime.now(UTC),
    )
    store = _store(runtime)
    marks = [(ids[0], "stale")] + [(run_id, "fresh") for run_id in ids[1:]]
    results = await _writes(store, marks, finish={ids[0]: stale})
    assert results[0].revision is None and not results[0].moved  # the fence held
    assert all(w.revision is not None for w in results[1:])
    found = await _marks(runtime, ids)
    assert found[ids[0]] == [] and all(found[i] == ["fresh"] for i in ids[1:])
    async with runtime.sessionmaker() as session:
        status = (
            await session.execute(
                text("SELECT status FROM attempts WHERE id = :id"), {"id": claimed.attempt_id}
            )
        ).scalar_one()
    assert status == "running"
