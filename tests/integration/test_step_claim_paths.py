"""Claiming a ready action step without the run lock (the claim decision on an unlocked
read, written by the run writer): the same decision and change set as the locked
claim, written once, and the locked claim when the run moved between the read and the
write; a run of Text template steps
continued in-process records each attempt and event exactly once."""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.db.run_store import load_state, lock_run
from backend.engine.outcomes import AttemptFailed, AttemptOutcome, AttemptSucceeded
from backend.runtime import Runtime
from backend.services.runs.execution.step_changes import claim_change, completion
from backend.services.runs.execution.transition import ChangeSet
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish

pytestmark = pytest.mark.integration

UNREACHED = "http://127.0.0.1:9/never-called"  # no worker runs the steps


async def _started_run(client: httpx.AsyncClient, runtime: Runtime) -> uuid.UUID:
    """A run of start -> s0 -> s1 (HTTP steps) whose s0 is ready, with no job queued."""
    nodes = [node("start", "trigger.manual")]
    nodes += [node(f"s{i}", "http.request", method="POST", url=UNREACHED) for i in range(2)]
    wf = await publish(client, diagram(nodes, [edge("start", "s0"), edge("s0", "s1")]))
    answer = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"a": 1}})
    await runtime.redis.flushall()  # no worker: this test drives the use case itself
    return uuid.UUID(answer.json()["run_id"])


async def _stored(runtime: Runtime, run_id: uuid.UUID) -> dict[str, Any]:
    """The run's revision, attempts per step and event kinds per step as stored."""
    async with runtime.engine.connect() as conn:
        revision = (
            await conn.execute(text("select revision from runs where id = :id"), {"id": run_id})
        ).scalar_one()
        attempts = Counter(
            step
            for (step,) in await conn.execute(
                text("select step_id from attempts where run_id = :id"), {"id": run_id}
            )
        )
        events = Counter(
            (kind, step)
            for kind, step in await conn.execute(
                text("select kind, step_id from events where run_id = :id"), {"id": run_id}
            )
        )
    return {"revision": revision, "attempts": attempts, "events": events}


async def test_unlocked_and_locked_claim_compute_the_same_change_set(
    client: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await _started_run(client, runtime)
    store, env = runtime.execution.env.store, runtime.execution.env
    now = env.clock.now()
    read = await store.read_unlocked(run_id)
    assert read is not None
    row, unlocked = read
    graph = await store.graph(row.version_id)
    fast = ChangeSet.of(
        unlocked, claim_change(graph, unlocked, "s0", run_id, now, env.worker, env.lease_seconds)
    )
    async with runtime.sessionmaker() as session, session.begin():
        run = await lock_run(session, run_id)
        assert run is not None
        loaded = await load_state(session, run, children=False)
    locked = ChangeSet.of(
        loaded, claim_change(graph, loaded, "s0", run_id, now, env.worker, env.lease_seconds)
    )
    assert fast == locked
    assert fast.start is not None and fast.start["step_id"] == "s0"
    assert [e[0] for e in fast.events] == ["step.started"]

    locked_calls = _count_locked(runtime, monkeypatch)
    before = await _stored(runtime, run_id)
    claimed = await runtime.execution.steps.claim(run_id, "s0")
    assert claimed is not None and claimed.step_id == "s0" and claimed.input == {"a": 1}
    assert locked_calls == []  # written by the one fenced statement
    after = await _stored(runtime, run_id)
    assert after["revision"] == before["revision"] + 1 == claimed.revision
    assert after["attempts"] == Counter({"s0": 1})
    assert after["events"] - before["events"] == Counter({("step.started", "s0"): 1})
    # a second job for the same step finds it claimed: nothing written
    assert await runtime.execution.steps.claim(run_id, "s0") is None
    assert await _stored(runtime, run_id) == after


async def test_claim_takes_the_lock_when_the_run_moved_after_the_read(
    client: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await _started_run(client, runtime)
    store = runtime.execution.env.store
    read_unlocked = store.read_unlocked
    reads = []

    async def read_then_move(run: uuid.UUID) -> Any:
        found = await read_unlocked(run)
        reads.append(copy.deepcopy(found))
        async with runtime.engine.begin() as conn:  # another writer moves the run
            await conn.execute(
                text("update runs set revision = revision + 1 where id = :id"), {"id": run}
            )
        return found

    monkeypatch.setattr(store, "read_unlocked", read_then_move)
    before = await _stored(runtime, run_id)
    claimed = await runtime.execution.steps.claim(run_id, "s0")
    assert len(reads) == 1  # the unlocked write was refused; the locked path claimed
    assert claimed is not None and claimed.step_id == "s0"
    after = await _stored(runtime, run_id)
    assert after["revision"] == before["revision"] + 2 == claimed.revision
    assert after["attempts"] == Counter({"s0": 1})
    assert after["events"] - before["events"] == Counter({("step.started", "s0"): 1})


async def test_template_steps_continued_in_process_record_each_attempt_once(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    nodes = [node("start", "trigger.manual")]
    nodes += [
        node(f"t{i}", "data.template", template="{{ input.text | default('go') }}+" + str(i))
        for i in range(3)
    ]
    edges = [edge("start", "t0"), edge("t0", "t1"), edge("t1", "t2")]
    wf = await publish(client, diagram(nodes, edges))
    ids = []
    for _ in range(4):
        answer = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {}})
        ids.append(uuid.UUID(answer.json()["run_id"]))
    for run_id in ids:
        assert await wait_for_run(runtime, run_id) == "succeeded"
        stored = await _stored(runtime, run_id)
        assert stored["attempts"] == Counter({"t0": 1, "t1": 1, "t2": 1})
        for step in ("t0", "t1", "t2"):
            assert stored["events"][("step.started", step)] == 1
            assert stored["events"][("step.succeeded", step)] == 1
        async with runtime.engine.connect() as conn:
            output = (
                await conn.execute(text("select output from runs where id = :id"), {"id": run_id})
            ).scalar_one()
        assert output == {"text": "go+0+1+2"}


def _count_locked(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[uuid.UUID]:
    """Run ids of the locked transitions from now on (the list fills as they happen)."""
    transitions = runtime.execution.writer
    calls: list[uuid.UUID] = []
    locked_transition = transitions.locked

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return await locked_transition(*args, **kwargs)

    monkeypatch.setattr(transitions, "locked", counted)
    return calls


@pytest.mark.parametrize("last", ["succeeds", "fails"])
async def test_run_end_written_unlocked_only_when_it_succeeds(
    client: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch, last: str
) -> None:
    """The completion that ends a run ``succeeded`` is written by the one fenced statement
    and computes the same change set as under the lock; one that fails the run (which may
    start the error workflow in the same transaction) is written under the lock."""
    run_id = await _started_run(client, runtime)
    steps, env = runtime.execution.steps, runtime.execution.env
    first = await steps.claim(run_id, "s0")
    assert first is not None
    second = await steps.complete(run_id, first, AttemptSucceeded({"n": 1}))
    assert second is not None and second.step_id == "s1" and second.state is not None
    outcome: AttemptOutcome = AttemptSucceeded({"n": 2})
    if last == "fails":
        outcome = AttemptFailed({"message": "no", "kind": "http_error"}, retryable=False)
    now = env.clock.now()
    graph = await env.store.graph(second.version_id)
    held = copy.deepcopy(second.state)
    fast = ChangeSet.of(
        held, completion(graph, held, second, outcome, now, env.worker, env.lease_seconds)
    )
    async with runtime.sessionmaker() as session, session.begin():
        run = await lock_run(session, run_id)
        assert run is not None
        loaded = await load_state(session, run, children=False)
    locked = ChangeSet.of(
        loaded, completion(graph, loaded, second, outcome, now, env.worker, env.lease_seconds)
    )
    assert fast == locked
    assert fast.run["status"] == ("succeeded" if last == "succeeds" else "failed")

    locked_calls = _count_locked(runtime, monkeypatch)
    before = await _stored(runtime, run_id)
    assert await steps.complete(run_id, second, outcome) is None
    after = await _stored(runtime, run_id)
    assert locked_calls == ([] if last == "succeeds" else [run_id])
    assert after["revision"] == before["revision"] + 1
    assert after["attempts"] == Counter({"s0": 1, "s1": 1})
    kind = "run.succeeded" if last == "succeeds" else "run.failed"
    assert sum(n for (k, _), n in after["events"].items() if k == kind) == 1
    async with runtime.engine.connect() as conn:
        status, finished = (
            await conn.execute(
                text("select status, finished_at from runs where id = :id"), {"id": run_id}
            )
        ).one()
    assert status == fast.run["status"] and finished is not None
    # a duplicate completion of the last attempt changes nothing
    assert await steps.complete(run_id, second, outcome) is None
    assert await _stored(runtime, run_id) == after
