"""The run store's hot statements on asyncpg directly: the unlocked read of a run in one
statement (large values read back in full, a run without step records), the write that
ends a run returning the workflow's settings (no second round trip to free a slot), and
both prepared statements working again on new connections after PostgreSQL restarts."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.db.payloads import Unresolved, reference_of
from backend.db.run_store import PgRunStore, load_state, lock_run
from backend.engine.outcomes import AttemptSucceeded
from backend.engine.ports import Written
from backend.runtime import Runtime
from backend.services.availability import database_unavailable
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish, set_settings
from tests.integration.railyard_processes import api, own_servers

pytestmark = pytest.mark.integration

UNREACHED = "http://127.0.0.1:9/never-called"  # no worker runs the steps


def _chain(steps: int) -> dict[str, Any]:
    """start -> s0 -> ... (HTTP steps no worker runs)."""
    nodes = [node("start", "trigger.manual")]
    nodes += [node(f"s{i}", "http.request", method="POST", url=UNREACHED) for i in range(steps)]
    edges = [edge("start", "s0")] + [edge(f"s{i}", f"s{i + 1}") for i in range(steps - 1)]
    return diagram(nodes, edges)


async def _start(client: httpx.AsyncClient, runtime: Runtime, wf: dict[str, Any], data: Any) -> str:
    """Start a run of ``wf`` with input ``data``; no job stays queued."""
    r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": data})
    assert r.status_code in (200, 201, 202), r.text
    await runtime.redis.flushall()  # no worker: the test drives the use cases itself
    return str(r.json()["run_id"])


async def test_unlocked_read_matches_the_locked_load_with_large_values(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """A run whose input (and so its first step's input) is stored by reference reads
    back through the one-statement unlocked read equal to the locked load: the first
    step's input in full, the run's own input left unread once the run has started (the
    trigger's record holds it from then on: backend/db/unread_input.py, started_input)."""
    wf = await publish(client, _chain(2))
    big = {"rows": [{"i": i, "text": "x" * 60} for i in range(5_000)]}  # ~350 KB of JSON
    run_id = uuid.UUID(await _start(client, runtime, wf, big))
    claimed = await runtime.execution.steps.claim(run_id, "s0")
    assert claimed is not None
    store = runtime.execution.env.store
    read = await store.read_unlocked(run_id)
    assert read is not None
    row, unlocked = read
    assert isinstance(unlocked.input["rows"], Unresolved)
    assert reference_of(unlocked.input["rows"]) is not None
    assert unlocked.steps["s0"].input == big
    async with runtime.sessionmaker() as session, session.begin():
        run = await lock_run(session, run_id)
        assert run is not None
        loaded = await load_state(session, run, children=False)
    assert row.revision == run.revision and row.workflow_id == run.workflow_id
    assert unlocked.steps == loaded.steps
    assert unlocked == loaded


async def test_unlocked_read_of_a_queued_run_without_step_records(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """A run queued under a concurrency limit has no step records: the read gives its
    row and an empty set of steps; an unknown run reads as ``None``."""
    wf = await publish(client, _chain(1))
    await set_settings(client, wf, max_concurrent_runs=1)
    await _start(client, runtime, wf, {"n": 1})
    queued = uuid.UUID(await _start(client, runtime, wf, {"n": 2}))
    store = runtime.execution.env.store
    read = await store.read_unlocked(queued)
    assert read is not None
    row, state = read
    assert (row.status, state.status.value, state.steps) == ("queued", "queued", {})
    assert state.input == {"n": 2}
    assert await store.read_unlocked(uuid.uuid4()) is None


async def test_run_end_write_returns_settings_and_frees_the_slot(
    client: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fenced write that ends a run ``succeeded`` returns the workflow's settings
    (writes that do not end it return none), so freeing its concurrency slot reads no
    settings: the queued run is advanced all the same."""
    wf = await publish(client, _chain(1))
    await set_settings(client, wf, max_concurrent_runs=1)
    first = uuid.UUID(await _start(client, runtime, wf, {"n": 1}))
    second = await _start(client, runtime, wf, {"n": 2})
    store = runtime.execution.env.store
    written: list[Written] = []
    write_unlocked = store.write_unlocked

    async def recorded(*args: Any, **kwargs: Any) -> Written:
        result = await write_unlocked(*args, **kwargs)
        written.append(result)
        return result

    async def no_settings_read(workflow_id: uuid.UUID) -> Any:
        raise AssertionError("the ending write returned the settings")

    monkeypatch.setattr(store, "write_unlocked", recorded)
    monkeypatch.setattr(store, "read_settings", no_settings_read)
    advanced: list[str] = []

    async def dispatch_advance(run_id: str) -> None:
        advanced.append(run_id)

    monkeypatch.setattr(runtime.execution.env.dispatcher, "dispatch_advance", dispatch_advance)
    steps = runtime.execution.steps
    claimed = await steps.claim(first, "s0")
    assert claimed is not None
    assert await steps.complete(first, claimed, AttemptSucceeded({"ok": True})) is None
    assert [w.revision is not None for w in written] == [True, True]
    claim, end = written
    assert claim.settings is None
    assert end.settings is not None and end.settings.max_concurrent_runs == 1
    assert advanced == [second]


async def _retrying(call: Any) -> Any:
    """``call()``, again after a failure that means the database is unavailable (the
    first use of a connection the restart closed); any other error propagates."""
    for _ in range(3):
        try:
            return await call()
        except Exception as exc:
            if not database_unavailable(exc):
                raise
            await asyncio.sleep(0.2)
    return await call()


async def test_direct_statements_work_after_postgres_restarts(embedded_tmp_dir: Path) -> None:
    """The statements asyncpg prepared on the pooled connections are prepared again on
    the connections that replace them after PostgreSQL restarts (twice): the unlocked
    read, the claim and the completion that ends the run all succeed."""
    async with own_servers(embedded_tmp_dir) as (pg, settings):
        async with api(settings) as (rt, client):
            wf = await publish(client, _chain(1))
            run_id = uuid.UUID(await _start(client, rt, wf, {"n": 1}))
            store = rt.execution.env.store
            assert isinstance(store, PgRunStore)
            before = await store.read_unlocked(run_id)
            assert before is not None
            for _ in range(2):
                await asyncio.to_thread(pg.stop)
                await asyncio.to_thread(pg.start)
                after = await _retrying(lambda: store.read_unlocked(run_id))
                assert after is not None and after[0] == before[0]
                assert after[1].steps == before[1].steps
            steps = rt.execution.steps
            claimed = await _retrying(lambda: steps.claim(run_id, "s0"))
            assert claimed is not None
            await asyncio.to_thread(pg.stop)
            await asyncio.to_thread(pg.start)
            done = await _retrying(
                lambda: steps.complete(run_id, claimed, AttemptSucceeded({"ok": True}))
            )
            assert done is None
            read = await store.read_unlocked(run_id)
            assert read is not None and read[0].status == "succeeded"
