"""The run store's contract (backend/engine/ports.py ``RunStore`` and ``RunTransaction``),
checked through the port alone against both implementations: the PostgreSQL store
(backend/db/run_store.py) and the in-memory fake the execution use cases' unit tests run on
(tests/fakes/run_store.py). What one store does here the other must do too."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.db.run_store import PgRunStore
from backend.engine.model import ChildSummary, RunState
from backend.engine.ports import (
    AuditEntry,
    DuplicateRun,
    FinishedAttempt,
    NewAttempt,
    NewRun,
    RunStore,
    StaleAttempt,
    VersionRow,
    WorkflowSettings,
)
from backend.engine.states import RunStatus, StepStatus
from backend.runtime import Runtime
from backend.services.identity import references
from designer_schema.graph import WorkflowGraph
from tests.diagrams import diagram, edge, node
from tests.fakes.run_store import MemoryRunStore
from tests.integration.flows import publish, set_settings
from tests.unit.engine.driver import compile_dict

pytestmark = pytest.mark.integration

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIAGRAM = diagram(
    [node("start", "trigger.manual"), node("set", "control.set", mapping={"n": "=n"})],
    [edge("start", "set")],
)


@dataclass
class Arranged:
    """A store with one published workflow (``version``, its compiled ``graph``) and a
    way to change the workflow's settings as saving them does; ``audited(object id)``:
    the actions of the audit rows the store holds for that object (outside the port: the
    rows are written, never read, by the run store)."""

    store: RunStore
    version: VersionRow
    graph: WorkflowGraph
    set_settings: Callable[..., Awaitable[None]]
    audited: Callable[[str], Awaitable[list[str]]]


@pytest.fixture(params=["memory", "postgres"])
async def arranged(
    request: pytest.FixtureRequest, client: httpx.AsyncClient, runtime: Runtime
) -> Arranged:
    """The store under test with the workflow of :data:`DIAGRAM` published (the memory
    store runs beside the test servers, which it does not use)."""
    if request.param == "memory":
        memory = MemoryRunStore()
        version = memory.add_workflow(compile_dict(DIAGRAM))

        async def set_memory(**settings: Any) -> None:
            memory.set_settings(version.workflow_id, settings)

        async def audited_memory(object_id: str) -> list[str]:
            return [e.action for e in memory.tables.audit if e.object_id == object_id]

        graph = await memory.graph(version.id)
        return Arranged(memory, version, graph, set_memory, audited_memory)
    wf = await publish(client, DIAGRAM)
    store = PgRunStore(runtime.sessionmaker, refusal=references.called_workflow_refusal)
    async with store.transaction() as tx:
        found = await tx.resolve_version(wf["id"], None)
    assert found is not None
    version = VersionRow(found[1], found[0], found[2])

    async def set_pg(**settings: Any) -> None:
        await set_settings(client, wf, **settings)

    async def audited_pg(object_id: str) -> list[str]:
        async with runtime.engine.connect() as conn:
            found = await conn.execute(
                text("select action from audit_log where object_id = :id order by id"),
                {"id": object_id},
            )
            return list(found.scalars())

    return Arranged(store, version, await store.graph(version.id), set_pg, audited_pg)


def new_run(version: VersionRow, *, key: str | None = None, at: datetime = T0) -> NewRun:
    return NewRun(
        id=uuid.uuid4(),
        workflow_id=version.workflow_id,
        version_id=version.id,
        version_number=version.number,
        trigger="manual",
        input={"n": 1},
        created_at=at,
        idempotency_key=key,
    )


def started(new: NewRun) -> RunState:
    """The state a start computes: the trigger step done, ``set`` ready, one event."""
    state = RunState(
        run_id=str(new.id),
        workflow_id=str(new.workflow_id),
        version_number=new.version_number,
        status=RunStatus.RUNNING,
        input=new.input,
        steps={},
        started_at=T0,
    )
    trigger = state.step("start")
    trigger.status, trigger.output, trigger.ports = StepStatus.SUCCEEDED, new.input, ("out",)
    trigger.started_at = trigger.finished_at = T0
    state.step("set").status = StepStatus.READY
    state.step("set").input = new.input
    state.changed |= {"start", "set"}
    state.emit("run.started")
    return state


def claim(new: NewRun, token: str = "token-1") -> NewAttempt:
    return NewAttempt(
        step_id="set",
        number=1,
        fencing_token=token,
        idempotency_key=f"{new.id}:set",
        worker="test:1",
        input=new.input,
        config={},
        lease_expires_at=T0 + timedelta(seconds=60),
        started_at=T0,
    )


def finish(attempt: NewAttempt, token: str | None = None) -> FinishedAttempt:
    assert attempt.id is not None
    return FinishedAttempt(
        attempt.id, token or attempt.fencing_token, "succeeded", {"n": 1}, None, T0
    )


async def insert(a: Arranged, new: NewRun, start: NewAttempt | None = None) -> int:
    written = await a.store.insert_started(new, started(new), WorkflowSettings(), start=start)
    assert written.revision is not None and not written.moved
    return written.revision


async def test_a_started_run_reads_back_as_written(arranged: Arranged) -> None:
    new = new_run(arranged.version)
    start = claim(new)
    revision = await insert(arranged, new, start)
    assert start.id is not None
    read = await arranged.store.read_unlocked(new.id)
    assert read is not None
    row, state = read
    assert (row.id, row.status, row.revision, row.input) == (new.id, "running", revision, {"n": 1})
    assert state.steps == started(new).steps
    assert state.status is RunStatus.RUNNING and not state.changed and not state.events
    assert await arranged.store.read_unlocked(uuid.uuid4()) is None
    assert await arranged.store.graph(arranged.version.id) == arranged.graph


async def test_an_idempotency_key_holds_one_run(arranged: Arranged) -> None:
    first = new_run(arranged.version, key="delivery-1")
    await insert(arranged, first)
    with pytest.raises(DuplicateRun):
        await insert(arranged, new_run(arranged.version, key="delivery-1"))
    assert await arranged.store.run_by_idempotency_key("delivery-1") == (first.id, "running")


async def test_a_start_decided_on_old_settings_is_refused(arranged: Arranged) -> None:
    await arranged.set_settings(max_concurrent_runs=1)
    new = new_run(arranged.version)
    written = await arranged.store.insert_started(new, started(new), WorkflowSettings())
    assert written.revision is None and written.moved
    assert written.settings is not None and written.settings.max_concurrent_runs == 1
    assert await arranged.store.read_unlocked(new.id) is None
    current = await arranged.store.read_settings(arranged.version.workflow_id)
    assert current.max_concurrent_runs == 1


async def test_an_unlocked_write_is_fenced_by_the_revision(arranged: Arranged) -> None:
    new = new_run(arranged.version)
    revision = await insert(arranged, new)
    read = await arranged.store.read_unlocked(new.id)
    assert read is not None
    _, state = read
    state.step("set").status = StepStatus.RUNNING
    state.touch("set")
    moved = await arranged.store.write_unlocked(
        new.id, state, finish=None, start=None, expected_revision=revision + 5
    )
    assert moved.revision is None and moved.moved and state.changed == {"set"}
    done = await arranged.store.write_unlocked(
        new.id, state, finish=None, start=None, expected_revision=revision
    )
    assert done.revision == revision + 1 and done.settings is None and not state.changed
    again = await arranged.store.read_unlocked(new.id)
    assert again is not None and again[0].revision == revision + 1
    assert again[1].steps["set"].status is StepStatus.RUNNING


async def test_the_write_that_ends_a_run_returns_the_settings(arranged: Arranged) -> None:
    await arranged.set_settings(max_concurrent_runs=3)
    settings = await arranged.store.read_settings(arranged.version.workflow_id)
    new = new_run(arranged.version)
    written = await arranged.store.insert_started(new, started(new), settings)
    assert written.revision is not None
    read = await arranged.store.read_unlocked(new.id)
    assert read is not None
    _, state = read
    state.step("set").status = StepStatus.SUCCEEDED
    state.touch("set")
    state.status, state.output, state.finished_at = RunStatus.SUCCEEDED, {"n": 1}, T0
    ended = await arranged.store.write_unlocked(
        new.id, state, finish=None, start=None, expected_revision=written.revision
    )
    assert ended.settings is not None and ended.settings.max_concurrent_runs == 3


async def test_a_completion_whose_token_no_longer_holds_writes_nothing(
    arranged: Arranged,
) -> None:
    new = new_run(arranged.version)
    start = claim(new)
    await insert(arranged, new, start)
    assert start.id is not None
    later = T0 + timedelta(seconds=120)
    assert await arranged.store.extend_lease(start.id, start.fencing_token, later)
    assert not await arranged.store.extend_lease(start.id, "someone-else", later)
    with pytest.raises(StaleAttempt):
        async with arranged.store.transaction() as tx:
            row = await tx.lock(new.id)
            assert row is not None
            await tx.add_event(new.id, "note", {"x": 1})
            state = await tx.load(row, children=False)
            state.step("set").status = StepStatus.RUNNING
            state.touch("set")
            await tx.save(row, state, finish=finish(start, "someone-else"))
    async with arranged.store.transaction() as tx:  # rolled back: the step still ready
        assert await tx.step_outcomes(new.id) == {"start": "succeeded", "set": "ready"}
        row = await tx.lock(new.id)
        assert row is not None
        state = await tx.load(row, children=False)
        state.step("set").status = StepStatus.RUNNING
        state.touch("set")
        saved = await tx.save(row, state, finish=finish(start))
        assert saved.revision == row.revision + 1
    async with arranged.store.transaction() as tx:  # a duplicate completion is refused
        assert not await tx.close_attempt(finish(start))
    assert not await arranged.store.extend_lease(start.id, start.fencing_token, later)


async def test_a_transaction_that_raises_leaves_nothing(arranged: Arranged) -> None:
    new = new_run(arranged.version)
    with pytest.raises(RuntimeError):
        async with arranged.store.transaction() as tx:
            assert await tx.insert_run(new)
            assert await tx.peek(new.id) == ("queued", new.workflow_id)
            raise RuntimeError("rolled back")
    async with arranged.store.transaction() as tx:
        assert await tx.peek(new.id) is None
        assert await tx.insert_run(new)
        assert not await tx.insert_run(new)  # the same id again: nothing
    keyed = new_run(arranged.version, key="k")
    with pytest.raises(DuplicateRun):
        async with arranged.store.transaction() as tx:
            assert await tx.insert_run(keyed)
            await tx.insert_run(new_run(arranged.version, key="k"))
    async with arranged.store.transaction() as tx:
        assert await tx.peek(keyed.id) is None
        assert await tx.peek(new.id) == ("queued", new.workflow_id)


async def test_an_audit_row_commits_with_the_transaction(arranged: Arranged) -> None:
    """The audit row of a run request is kept when its transaction commits, not when it
    raises; the publisher of the run's version may run its own workflow."""
    new = new_run(arranged.version)
    await insert(arranged, new)
    with pytest.raises(RuntimeError):
        async with arranged.store.transaction() as tx:
            await tx.add_audit(AuditEntry("run.pause", "run", str(new.id)))
            raise RuntimeError("rolled back")
    async with arranged.store.transaction() as tx:
        await tx.add_audit(AuditEntry("run.cancel", "run", str(new.id), details={"n": 1}))
        assert await tx.publisher_refusal(new.id, str(new.workflow_id)) is None
    assert await arranged.audited(str(new.id)) == ["run.cancel"]


async def test_queued_runs_inserted_together_say_which_were_written(arranged: Arranged) -> None:
    first = [new_run(arranged.version) for _ in range(3)]
    async with arranged.store.transaction() as tx:
        assert await tx.insert_queued_runs([]) == []
        assert await tx.insert_queued_runs(first) == [True, True, True]
        second = [first[1], new_run(arranged.version)]
        assert await tx.insert_queued_runs(second) == [False, True]  # an existing id: nothing
        for new in [*first, second[1]]:
            assert await tx.peek(new.id) == ("queued", new.workflow_id)


async def test_queued_runs_wait_in_creation_order_and_hold_no_slot(arranged: Arranged) -> None:
    wf = arranged.version.workflow_id
    older = new_run(arranged.version, at=T0)
    newer = new_run(arranged.version, at=T0 + timedelta(seconds=1))
    running = new_run(arranged.version)
    await insert(arranged, running)
    async with arranged.store.transaction() as tx:
        await tx.lock_admission(wf)
        assert await tx.insert_run(newer)
        assert await tx.insert_run(older)
        assert await tx.oldest_queued(wf, 5) == [older.id, newer.id]
        assert await tx.oldest_queued(wf, 1) == [older.id]
        assert await tx.active_count(wf) == 1
        row = await tx.lock(older.id)
        assert row is not None and row.status == "queued"
        state = await tx.load(row)
        assert state.status is RunStatus.QUEUED and state.steps == {} and state.children == {}


async def test_versions_names_and_settings_resolve(arranged: Arranged) -> None:
    version = arranged.version
    async with arranged.store.transaction() as tx:
        assert await tx.resolve_version(str(version.workflow_id), None) == (
            version.workflow_id,
            version.id,
            version.number,
        )
        assert await tx.resolve_version(str(version.workflow_id), version.number + 1) is None
        assert await tx.resolve_version("not-a-uuid", None) is None
        assert await tx.resolve_version(str(uuid.uuid4()), None) is None
        assert await tx.workflow_name(uuid.uuid4()) is None
        assert await tx.settings(uuid.uuid4()) == WorkflowSettings()
        assert await tx.graph(version.id) == arranged.graph


def child_of(parent: NewRun, version: VersionRow, index: int) -> NewRun:
    child = new_run(version, at=T0 + timedelta(seconds=index))
    child.parent_run_id, child.parent_step_id, child.parent_index = parent.id, "set", index
    return child


async def end_child(a: Arranged, child: NewRun, status: RunStatus, result: Any) -> None:
    """Write the end of a queued child run (``result``: its output, or its error)."""
    read = await a.store.read_unlocked(child.id)
    assert read is not None
    row, state = read
    state.status, state.started_at, state.finished_at = status, T0, T0
    if status is RunStatus.SUCCEEDED:
        state.output = result
    else:
        state.error = result
    written = await a.store.write_unlocked(
        child.id, state, finish=None, start=None, expected_revision=row.revision
    )
    assert written.revision == row.revision + 1


async def test_child_runs_are_read_in_short_unless_their_outputs_are_wanted(
    arranged: Arranged,
) -> None:
    parent = new_run(arranged.version)
    await insert(arranged, parent)
    children = [child_of(parent, arranged.version, i) for i in range(3)]
    async with arranged.store.transaction() as tx:
        assert await tx.insert_queued_runs(children) == [True, True, True]
        assert await tx.insert_queued_runs(children[:1]) == [False]  # the same ids: nothing
    await end_child(arranged, children[0], RunStatus.SUCCEEDED, {"i": 0})
    await end_child(arranged, children[2], RunStatus.FAILED, {"kind": "boom"})
    async with arranged.store.transaction() as tx:
        row = await tx.lock(parent.id)
        assert row is not None
        short = await tx.load(row, outputs=lambda records, by_step, summaries: set())
        assert [(c.index, c.status, c.output, c.error) for c in short.children["set"]] == [
            (1, "queued", None, None),
            (2, "failed", None, {"kind": "boom"}),
        ]
        assert short.child_summaries == {"set": ChildSummary(succeeded=1, next_index=3)}
        full = await tx.load(row)  # no ``outputs``: every child of every step, with output
        assert [(c.index, c.run_id, c.output) for c in full.children["set"]] == [
            (0, str(children[0].id), {"i": 0}),
            (1, str(children[1].id), None),
            (2, str(children[2].id), None),
        ]
        assert full.child_summaries == {}
        assert (await tx.load(row, children=False)).children == {}
