"""The run writer (backend/services/runs/execution/writer.py) writes every decision's change set
the same way whichever form it chooses: each decision is taken on runs in the same state
by a writer that may use the fenced statement (three runs at once, so their statements
are grouped: ``run_writes.RunWrites``) and by one that takes the run lock for everything
(one run); the rows each run is left with (run, step records, attempts, events) are the
same, and the fenced writer chose the form the rule (``writer.lock_reason``) says."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.engine.outcomes import AttemptFailed, AttemptSucceeded
from backend.engine.ports import VersionRow
from backend.engine.states import AttemptStatus
from backend.runtime import Runtime
from backend.services.runs.execution import decisions
from backend.services.runs.execution.service import Execution
from backend.services.runs.execution.starts import Starts
from backend.services.runs.execution.step_changes import Claimed
from backend.services.runs.execution.transition import Change, Decide
from backend.services.runs.execution.writer import (
    LOCKED,
    READ,
    STATEMENT,
    Basis,
    OwnWrite,
    RunWriter,
)
from tests.diagrams import diagram, edge, node
from tests.integration.fake_clock import FakeClock
from tests.integration.flows import publish

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
UNREACHED = "http://127.0.0.1:9/never-called"  # no worker runs the steps
RETRY = {"max_attempts": 3, "initial_interval": 5.0, "backoff_coefficient": 1.0, "jitter": 0.0}
DIAGRAM = diagram(
    [
        node("start", "trigger.manual"),
        node("s0", "http.request", method="POST", url=UNREACHED, retry=RETRY),
        node("s1", "http.request", method="POST", url=UNREACHED),
    ],
    [edge("start", "s0"), edge("s0", "s1")],
)
FENCED_RUNS = 3


@dataclass
class Case:
    """One decision: ``prepare`` brings a started run to the state the decision is taken
    on (returns the attempt claimed, if any); ``decide`` builds the decision; ``own``:
    the decision is taken on the state the claim wrote (else on an unlocked read);
    ``form``: the form the fenced writer must choose."""

    prepare: Callable[[Execution, uuid.UUID], Awaitable[Claimed | None]]
    decide: Callable[[Execution, Claimed | None], Decide]
    form: str
    own: bool = False


async def _nothing(execution: Execution, run_id: uuid.UUID) -> None:
    return None


async def _claimed(execution: Execution, run_id: uuid.UUID) -> Claimed | None:
    claimed = await execution.steps.claim(run_id, "s0")
    assert claimed is not None
    return claimed


async def _paused(execution: Execution, run_id: uuid.UUID) -> None:
    await execution.pause_run(run_id)


def _complete(outcome: Any) -> Callable[[Execution, Claimed | None], Decide]:
    def build(execution: Execution, done: Claimed | None) -> Decide:
        assert done is not None
        env = execution.env
        return decisions.complete(done, outcome, env.worker, env.lease_seconds, claim_next=True)

    return build


def _reopen(execution: Execution, done: Claimed | None) -> Decide:
    assert done is not None
    error = {"message": "lease expired: worker lost", "kind": "lease_expired"}
    return decisions.reopen(
        "s0", done.attempt_id, done.token, AttemptStatus.EXPIRED, error, lost=True
    )


def _claim(execution: Execution, _: Claimed | None) -> Decide:
    return decisions.claim("s0", execution.env.worker, execution.env.lease_seconds)


FAILED = AttemptFailed({"message": "no", "kind": "http_error"}, retryable=True)
CASES = {
    "claim": Case(_nothing, _claim, STATEMENT),
    "complete and claim the next step": Case(
        _claimed, _complete(AttemptSucceeded({"n": 1})), STATEMENT, own=True
    ),
    "retry": Case(_claimed, _complete(FAILED), STATEMENT, own=True),
    "fail the step and the run": Case(
        _claimed,
        _complete(AttemptFailed({"message": "no", "kind": "http_error"}, retryable=False)),
        LOCKED,
        own=True,
    ),
    "reopen a lost attempt": Case(_claimed, _reopen, STATEMENT),
    "advance": Case(_nothing, lambda e, c: decisions.advance(), LOCKED),
    "pause": Case(_nothing, lambda e, c: decisions.pause(), STATEMENT),
    "resume": Case(_paused, lambda e, c: decisions.resume(), STATEMENT),
    "cancel": Case(_claimed, lambda e, c: decisions.cancel("test"), LOCKED),
    "fail the run": Case(
        _claimed, lambda e, c: decisions.fail({"message": "x", "kind": "test"}), LOCKED
    ),
}


async def _version(client: httpx.AsyncClient, runtime: Runtime) -> VersionRow:
    wf = await publish(client, DIAGRAM)
    async with runtime.execution.env.store.transaction() as tx:
        found = await tx.resolve_version(wf["id"], None)
    assert found is not None
    return VersionRow(found[1], found[0], found[2])


async def _rows(runtime: Runtime, run_id: uuid.UUID, *, revision: bool = True) -> str:
    """What run ``run_id`` is stored as (its own id and the random and database-stamped
    values left out; ``revision`` False: its count of writes too), as comparable text."""
    queries = {
        "run": "select status, trigger, input, output, error, response, created_at,"
        " started_at, finished_at, deadline_at, version_number, revision from runs where id = :id",
        "steps": "select step_id, status, ports, input, output, error, attempts, not_before,"
        " started_at, finished_at, data from step_runs where run_id = :id order by step_id",
        "attempts": "select step_id, number, status, worker, idempotency_key, input, config,"
        " output, error, lease_expires_at, started_at, finished_at from attempts"
        " where run_id = :id order by number, step_id",
        "events": "select kind, step_id, data from events where run_id = :id order by id",
    }
    found: dict[str, Any] = {}
    async with runtime.engine.connect() as conn:
        for name, sql in queries.items():
            rows = (await conn.execute(text(sql), {"id": run_id})).mappings().all()
            found[name] = [dict(row) for row in rows]
        ids = (
            await conn.execute(
                text("select id from attempts where run_id = :id order by id"), {"id": run_id}
            )
        ).scalars()
        number = {attempt_id: n for n, attempt_id in enumerate(ids)}
    for event in found["events"]:  # an attempt's id is the database's: its rank instead
        if "attempt_id" in event["data"]:
            event["data"]["attempt_id"] = number[event["data"]["attempt_id"]]
    if not revision:
        del found["run"][0]["revision"]
    return json.dumps(found, default=str, sort_keys=True).replace(str(run_id), "<run>")


async def _apply(
    runtime: Runtime, writer: RunWriter, case: Case, run_id: uuid.UUID, done: Claimed | None
) -> Change | None:
    basis: Basis = READ
    if case.own:
        assert done is not None and done.row is not None and done.state is not None
        assert done.revision is not None
        basis = OwnWrite(done.row, done.state, done.revision)
    return await writer.apply(run_id, case.decide(runtime.execution, done), basis=basis)


@pytest.fixture
def clock(runtime: Runtime) -> Any:
    """Every use case reads one fixed instant (the rows compared carry no other time)."""
    real = runtime.execution.clock
    runtime.execution.clock = FakeClock(T0)
    yield runtime.execution.clock
    runtime.execution.clock = real


@pytest.mark.parametrize("name", list(CASES))
async def test_each_decision_leaves_the_same_rows_fenced_and_locked(
    client: httpx.AsyncClient, runtime: Runtime, clock: FakeClock, name: str
) -> None:
    case = CASES[name]
    execution = runtime.execution
    version = await _version(client, runtime)
    runs = []
    for _ in range(FENCED_RUNS + 1):
        started = await execution.start_run(version, {"a": 1}, trigger="manual")
        runs.append((started.run_id, await case.prepare(execution, started.run_id)))
    await runtime.redis.flushall()  # no worker: the test writes itself
    fenced = RunWriter(execution.env, execution.followups)
    locked = RunWriter(execution.env, execution.followups, fenced=False)

    *grouped, alone = runs
    changes = await asyncio.gather(
        *(_apply(runtime, fenced, case, run_id, done) for run_id, done in grouped)
    )
    change = await _apply(runtime, locked, case, *alone)

    assert [c.form if c else None for c in changes] == [case.form] * FENCED_RUNS
    assert change is not None and change.form == LOCKED
    expected = await _rows(runtime, alone[0])
    for run_id, _ in grouped:
        assert await _rows(runtime, run_id) == expected


async def test_a_start_leaves_the_same_rows_fenced_and_locked(
    client: httpx.AsyncClient, runtime: Runtime, clock: FakeClock
) -> None:
    """The start's decision: the fenced insert (three starts at once, grouped into one
    statement: ``run_inserts.RunInserts``) and the start in a transaction store the same
    run."""
    execution = runtime.execution
    version = await _version(client, runtime)
    fenced = Starts(execution.env, RunWriter(execution.env, execution.followups))
    locked = Starts(execution.env, RunWriter(execution.env, execution.followups, fenced=False))
    grouped = await asyncio.gather(
        *(fenced.start_run(version, {"a": 1}, trigger="manual") for _ in range(FENCED_RUNS))
    )
    alone = await locked.start_run(version, {"a": 1}, trigger="manual")
    await runtime.redis.flushall()
    # the start in a transaction writes twice (the queued run, then its start): only the
    # run's count of writes differs
    expected = await _rows(runtime, alone.run_id, revision=False)
    for started in grouped:
        assert await _rows(runtime, started.run_id, revision=False) == expected


async def test_a_run_timeout_is_written_under_the_lock(
    client: httpx.AsyncClient, runtime: Runtime, clock: FakeClock
) -> None:
    """Timing out a run (its running attempts cancelled, the error workflow's run
    inserted with its end) is written under the lock, whatever writer is asked."""
    execution = runtime.execution
    version = await _version(client, runtime)
    runs = []
    for _ in range(2):
        started = await execution.start_run(version, {"a": 1}, trigger="manual")
        await _claimed(execution, started.run_id)
        runs.append(started.run_id)
    async with runtime.engine.begin() as conn:
        await conn.execute(
            text("update runs set deadline_at = :at where id = any(:ids)"),
            {"at": T0 - timedelta(seconds=1), "ids": runs},
        )
    fenced = RunWriter(execution.env, execution.followups)
    locked = RunWriter(execution.env, execution.followups, fenced=False)
    first = await fenced.apply(runs[0], decisions.time_out(), basis=READ)
    second = await locked.apply(runs[1], decisions.time_out(), basis=READ)
    assert first is not None and second is not None
    assert (first.form, second.form, first.result, second.result) == (LOCKED, LOCKED, True, True)
    assert await _rows(runtime, runs[0]) == await _rows(runtime, runs[1])
