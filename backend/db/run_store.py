"""Persistence of runs, step runs, attempts and events (implements the engine's state I/O).

Every write path here follows the execution model: a transaction locks the run row
(``SELECT ... FOR UPDATE``), loads a :class:`~backend.engine.model.RunState`, lets the pure
engine change it, then writes the changed rows and the outbox events before commit.

Hot path (docs/engine.md, "Performance"): step rows are read with a column select (no ORM
objects); everything a transaction writes (changed step records, the run row when it
changed, events, the attempt it closes and the one it claims) goes in ONE statement of
data-modifying CTEs, :func:`save_state`. Events are stamped with ``clock_timestamp()``
(when written, not when the transaction began), so the event log's timings are real.
Statements are built once at import so SQLAlchemy's compiled cache and asyncpg's
prepared statements are hit every time.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import msgspec
from sqlalchemy import Table, bindparam, literal, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from backend.db import payloads
from backend.db.models import Attempt, Event, Run, StepRun, Workflow, WorkflowVersion
from backend.engine.model import ChildRequest, ChildRun, RunState, StepRecord
from backend.engine.states import RunStatus, StepStatus

_LOCK_RUN = select(Run).where(Run.id == bindparam("run_id")).with_for_update()


async def lock_run(session: AsyncSession, run_id: uuid.UUID) -> Run | None:
    """Return the run row locked ``FOR UPDATE`` (``None`` when it does not exist)."""
    result = await session.execute(_LOCK_RUN, {"run_id": run_id})
    return result.scalar_one_or_none()


# Core tables (not ORM entities): hot statements skip the ORM's compile and bulk paths.
_RUNS = cast(Table, Run.__table__)
_STEP_RUNS = cast(Table, StepRun.__table__)
_ATTEMPTS = cast(Table, Attempt.__table__)
_EVENTS = cast(Table, Event.__table__)
# Step record fields written back by save_state (all but the key columns).
_STEP_FIELDS = (
    "status",
    "ports",
    "input",
    "output",
    "error",
    "attempts",
    "not_before",
    "started_at",
    "finished_at",
    "data",
)
# Step record fields that may hold large values (stored by reference).
_VALUE_FIELDS = ("input", "output", "error", "data")
_SELECT_STEPS = select(*(_STEP_RUNS.c[name] for name in ("step_id", *_STEP_FIELDS))).where(
    _STEP_RUNS.c.run_id == bindparam("run_id")
)
_SELECT_CHILDREN = (
    select(
        _RUNS.c.id,
        _RUNS.c.parent_step_id,
        _RUNS.c.parent_index,
        _RUNS.c.status,
        _RUNS.c.output,
        _RUNS.c.error,
    )
    .where(_RUNS.c.parent_run_id == bindparam("run_id"))
    .order_by(_RUNS.c.parent_index)
)
_CURRENT_ATTEMPT = (
    (_ATTEMPTS.c.id == bindparam("attempt_id"))
    & (_ATTEMPTS.c.fencing_token == bindparam("token"))
    & (_ATTEMPTS.c.status == "running")
)
_FINISH_ATTEMPT = (
    update(_ATTEMPTS)
    .where(_CURRENT_ATTEMPT)
    .values(
        status=bindparam("status"),
        output=bindparam("output", type_=_ATTEMPTS.c.output.type),
        error=bindparam("error", type_=_ATTEMPTS.c.error.type),
        finished_at=bindparam("finished_at"),
    )
)


@dataclass
class Steps:
    """The step records of a run as of ``revision`` (``runs.revision`` after the write
    that produced them). Only the process that made that write may hold them: any other
    write bumps the revision and so invalidates them."""

    revision: int
    records: dict[str, StepRecord]


async def load_state(
    session: AsyncSession,
    run: Run,
    *,
    children: bool = True,
    steps: Steps | None = None,
) -> RunState:
    """Build the engine's view of ``run`` from its step rows.

    ``children=False`` skips the child-run query; only pass it when the run's graph has no
    Sub-workflow or For-each step (then the run has no children). ``steps`` are step
    records the caller holds from its own write of this run (a :class:`Steps` of the
    run's current ``revision``, checked under the run lock): they replace the step query.
    """
    records: dict[str, StepRecord]
    if steps is not None and steps.revision == run.revision:
        records = steps.records
    else:
        records = {}
        for row in await session.execute(_SELECT_STEPS, {"run_id": run.id}):
            fields = row._asdict()  # columns are StepRecord's fields
            fields["status"] = StepStatus(fields["status"])
            fields["ports"] = tuple(fields["ports"] or ())
            records[row.step_id] = StepRecord(**fields)
    by_step: dict[str, list[ChildRun]] = {}
    if children:
        for cid, step_id, index, status, output, error in await session.execute(
            _SELECT_CHILDREN, {"run_id": run.id}
        ):
            by_step.setdefault(str(step_id), []).append(
                ChildRun(str(step_id), int(index or 0), str(cid), status, output, error)
            )
    # held records come from this process's memory: full values, nothing to resolve
    loaded = records if steps is None or steps.revision != run.revision else {}
    run_input, run_output, run_error = await _resolve(session, run, loaded, by_step)
    return RunState(
        run_id=str(run.id),
        workflow_id=str(run.workflow_id),
        version_number=run.version_number,
        status=RunStatus(run.status),
        input=run_input,
        steps=records,
        output=run_output,
        error=run_error,
        response=run.response,
        started_at=run.started_at,
        finished_at=run.finished_at,
        children=by_step,
    )


async def _resolve(
    session: AsyncSession,
    run: Run,
    records: dict[str, StepRecord],
    children: dict[str, list[ChildRun]],
) -> list[Any]:
    """Put the full values back where the run's rows hold references to large values
    (backend/db/payloads.py): step records and children in place; returns the run's
    input, output and error."""
    values: list[Any] = [run.input, run.output, run.error]
    for rec in records.values():
        values += [rec.input, rec.output, rec.error, rec.data]
    for entries in children.values():
        values += [v for c in entries for v in (c.output, c.error)]
    resolved = iter(await payloads.resolve_values(session, values))
    run_values = [next(resolved) for _ in range(3)]
    for rec in records.values():
        rec.input, rec.output, rec.error, rec.data = (next(resolved) for _ in range(4))
    for entries in children.values():
        for c in entries:
            c.output, c.error = next(resolved), next(resolved)
    return run_values


async def create_child(session: AsyncSession, parent: Run, request: ChildRequest) -> ChildRun:
    """Insert the queued child run ``request`` asks for (a no-op when it exists).

    The version is the pinned number or the workflow's active one. When the workflow or
    version does not exist, no run is inserted and the returned record is ``failed`` with
    kind ``subworkflow_not_found``; the caller hands it to the engine like any child.
    """
    entry = ChildRun(request.step_id, request.index, request.run_id)
    try:
        workflow_id = uuid.UUID(request.workflow_id)
    except ValueError:
        workflow_id = None
    version = None
    if workflow_id is not None:
        workflow = await session.get(Workflow, workflow_id)
        number = request.version
        if workflow is not None and number is None:
            number = workflow.active_version
        if workflow is not None and number is not None:
            version = (
                await session.execute(
                    select(WorkflowVersion).where(
                        WorkflowVersion.workflow_id == workflow_id,
                        WorkflowVersion.number == number,
                    )
                )
            ).scalar_one_or_none()
    if version is None:
        which = "active version" if request.version is None else f"version {request.version}"
        entry.status = RunStatus.FAILED.value
        entry.error = {
            "message": f"workflow {request.workflow_id} has no {which}",
            "kind": "subworkflow_not_found",
        }
        return entry
    await session.execute(
        insert(Run)
        .values(
            id=uuid.UUID(request.run_id),
            workflow_id=version.workflow_id,
            version_id=version.id,
            version_number=version.number,
            status=RunStatus.QUEUED.value,
            trigger="subworkflow",
            input=await payloads.store_value(session, request.input),
            created_by=parent.created_by,
            parent_run_id=parent.id,
            parent_step_id=request.step_id,
            parent_index=request.index,
        )
        .on_conflict_do_nothing(index_elements=["id"])
    )
    return entry


def step_values(rec: StepRecord) -> dict[str, Any]:
    """The ``step_runs`` column values of a step record (all but the key columns)."""
    values = {name: getattr(rec, name) for name in _STEP_FIELDS}
    values["status"] = rec.status.value
    values["ports"] = list(rec.ports)
    return values


async def copy_steps(
    session: AsyncSession, source_run_id: uuid.UUID, target_run_id: uuid.UUID, step_ids: list[str]
) -> None:
    """Copy the step records ``step_ids`` of one run into another (a re-run's finished part).

    One ``INSERT ... SELECT`` of every field :func:`save_state` writes.
    """
    if not step_ids:
        return
    source = select(
        literal(target_run_id, type_=_STEP_RUNS.c.run_id.type),
        _STEP_RUNS.c.step_id,
        *(_STEP_RUNS.c[name] for name in _STEP_FIELDS),
    ).where(_STEP_RUNS.c.run_id == source_run_id, _STEP_RUNS.c.step_id.in_(step_ids))
    await session.execute(
        insert(_STEP_RUNS).from_select(["run_id", "step_id", *_STEP_FIELDS], source)
    )


class StaleAttempt(LookupError):
    """The attempt being completed is no longer the step's current one (its lease was
    taken over, or the run was cancelled or timed out): :func:`save_state` wrote nothing
    and the outcome must be discarded."""


@dataclass
class FinishedAttempt:
    """The outcome of an attempt, closed by :func:`save_state` if its fencing token still
    holds. ``status`` is ``succeeded`` or ``failed``; ``output``/``error`` JSON-able."""

    id: int
    fencing_token: str
    status: str
    output: Any
    error: Any
    finished_at: datetime


@dataclass
class NewAttempt:
    """An attempt claimed by :func:`claim_attempt`; ``id`` is set once it is written."""

    step_id: str
    number: int
    fencing_token: str
    idempotency_key: str
    worker: str
    input: Any
    config: Any
    lease_expires_at: datetime
    started_at: datetime
    id: int | None = None


# One statement for every write of an engine transaction (docs/engine.md, "Performance"):
# close the finished attempt (fenced), insert the claimed attempt, upsert the changed step
# records, update the run row (bumping its revision), append the events. Nothing is
# written unless the run row is at the expected revision (when one is given; the row is
# locked by the check) and the finished attempt's fencing token still holds.
_SAVE = text(
    """
    WITH at_revision AS (
        SELECT FROM runs
        WHERE id = CAST(:run_id AS uuid)
          AND (CAST(:expected AS bigint) IS NULL OR revision = CAST(:expected AS bigint))
        FOR UPDATE
    ), fin AS (
        UPDATE attempts
        SET status = CAST(:fin_status AS text), output = CAST(:fin_output AS jsonb),
            error = CAST(:fin_error AS jsonb), finished_at = CAST(:fin_at AS timestamptz)
        WHERE id = CAST(:fin_id AS bigint) AND fencing_token = CAST(:fin_token AS text)
          AND status = 'running' AND EXISTS (SELECT FROM at_revision)
        RETURNING id
    ), go AS (
        SELECT WHERE EXISTS (SELECT FROM at_revision)
                 AND (CAST(:fin_id AS bigint) IS NULL OR EXISTS (SELECT FROM fin))
    ), new_attempt AS (
        INSERT INTO attempts (run_id, step_id, number, fencing_token, status, worker,
                              idempotency_key, input, config, lease_expires_at, started_at)
        SELECT CAST(:run_id AS uuid), a.step_id, a.number, a.fencing_token, 'running',
               a.worker, a.idempotency_key, a.input, a.config, a.lease_expires_at,
               a.started_at
        FROM go, jsonb_to_recordset(CAST(:attempts AS jsonb)) AS a(
            step_id text, number int, fencing_token text, worker text,
            idempotency_key text, input jsonb, config jsonb, lease_expires_at timestamptz,
            started_at timestamptz)
        RETURNING id
    ), changed_steps AS (
        INSERT INTO step_runs (run_id, step_id, status, ports, input, output, error, attempts,
                               not_before, started_at, finished_at, data)
        SELECT CAST(:run_id AS uuid), s.step_id, s.status, s.ports, s.input, s.output,
               s.error, s.attempts, s.not_before, s.started_at, s.finished_at, s.data
        FROM go, jsonb_to_recordset(CAST(:steps AS jsonb)) AS s(
            step_id text, status text, ports jsonb, input jsonb, output jsonb, error jsonb,
            attempts int, not_before timestamptz, started_at timestamptz,
            finished_at timestamptz, data jsonb)
        ON CONFLICT (run_id, step_id) DO UPDATE SET
            status = EXCLUDED.status, ports = EXCLUDED.ports, input = EXCLUDED.input,
            output = EXCLUDED.output, error = EXCLUDED.error, attempts = EXCLUDED.attempts,
            not_before = EXCLUDED.not_before, started_at = EXCLUDED.started_at,
            finished_at = EXCLUDED.finished_at, data = EXCLUDED.data
    ), run_row AS (
        UPDATE runs
        SET status = CAST(:status AS text), output = CAST(:output AS jsonb),
            error = CAST(:error AS jsonb), response = CAST(:response AS jsonb),
            started_at = CAST(:started_at AS timestamptz),
            finished_at = CAST(:finished_at AS timestamptz), revision = runs.revision + 1
        FROM go
        WHERE runs.id = CAST(:run_id AS uuid)
        RETURNING runs.revision
    ), new_events AS (
        INSERT INTO events (run_id, kind, step_id, data, created_at)
        SELECT CAST(:run_id AS uuid), e.kind, e.step_id, e.data, clock_timestamp()
        FROM go, jsonb_to_recordset(CAST(:events AS jsonb))
            AS e(kind text, step_id text, data jsonb, ord int)
        ORDER BY e.ord
    )
    SELECT (SELECT count(*) FROM at_revision) AS at_revision,
           (SELECT count(*) FROM go) AS written,
           (SELECT id FROM new_attempt) AS attempt_id,
           (SELECT revision FROM run_row) AS revision
    """
).columns()
# The hottest statement goes to asyncpg directly (SQLAlchemy's execute path costs ~0.2 ms
# of CPU per call here): compiled once to asyncpg's positional form; asyncpg prepares it
# once per connection. JSON parameters are JSON text, as SQLAlchemy's jsonb codec on the
# connection expects.
_COMPILED_SAVE = _SAVE.compile(dialect=asyncpg_dialect())
_SAVE_SQL = str(_COMPILED_SAVE)
_SAVE_PARAMS = tuple(_COMPILED_SAVE.positiontup or ())
_RUN_FIELDS = ("status", "output", "error", "response", "started_at", "finished_at")


def _autocommit_driver(connection: AsyncConnection) -> Any:
    """The asyncpg connection under ``connection``, which must be in autocommit (a
    statement sent past SQLAlchemy would not join a transaction SQLAlchemy has yet to
    begin on the wire)."""
    sync = connection.sync_connection
    if sync is None or sync.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
        raise ValueError("write_state needs an AsyncSession or an autocommit connection")
    return sync.connection.driver_connection


@dataclass
class Written:
    """What :func:`write_state` did: ``revision`` is the run's new revision, ``None``
    when nothing was written because the run was not at the expected revision
    (``moved``) or the finished attempt's token no longer held (not ``moved``)."""

    revision: int | None
    moved: bool = False


async def write_state(
    db: AsyncSession | AsyncConnection,
    run_id: uuid.UUID,
    state: RunState,
    *,
    finish: FinishedAttempt | None = None,
    start: NewAttempt | None = None,
    expected_revision: int | None = None,
) -> Written:
    """Write the changed step records, the run fields and the events of ``state``,
    closing ``finish`` and inserting ``start`` (its ``id`` is set), in ONE statement.

    ``db`` is a session inside the transaction that holds the run lock, or a connection
    in autocommit (then the statement is its own transaction, sent straight to asyncpg).
    With ``expected_revision`` the write happens only if the run row is still at that
    revision (optimistic: used in autocommit); without it the caller holds the run lock.
    On success the run's revision is bumped and ``state.changed`` / ``state.events`` are
    cleared; otherwise nothing is written and ``state`` is left as it was.
    """
    ext = payloads.Externalizer()
    steps, events = _changes(state, ext)
    attempts = []
    if start is not None:
        attempts.append(
            {
                "step_id": start.step_id,
                "number": start.number,
                "fencing_token": start.fencing_token,
                "worker": start.worker,
                "idempotency_key": start.idempotency_key,
                "input": ext.value(start.input),
                "config": ext.value(start.config),
                "lease_expires_at": start.lease_expires_at,
                "started_at": start.started_at,
            }
        )
    params: dict[str, Any] = {
        "run_id": run_id,
        "expected": expected_revision,
        "fin_id": finish.id if finish else None,
        "fin_token": finish.fencing_token if finish else None,
        "fin_status": finish.status if finish else None,
        "fin_output": _json(ext.value(finish.output)) if finish else None,
        "fin_error": _json(ext.value(finish.error)) if finish else None,
        "fin_at": finish.finished_at if finish else None,
        "attempts": _json(attempts),
        "steps": _json(steps),
        "events": _json(events),
        "status": state.status.value,
        "output": _json(ext.value(state.output)),
        "error": _json(ext.value(state.error)),
        "response": _json(state.response),
        "started_at": state.started_at,
        "finished_at": state.finished_at,
    }
    await payloads.store(db, ext.payloads)
    if isinstance(db, AsyncSession):
        row = (await db.execute(_SAVE, params)).one()
    else:
        row = await _autocommit_driver(db).fetchrow(
            _SAVE_SQL, *(params[name] for name in _SAVE_PARAMS)
        )
    at_revision, written, attempt_id, revision = row
    if not written:
        return Written(None, moved=not at_revision)
    if start is not None:
        start.id = int(attempt_id)
    state.changed.clear()
    state.events.clear()
    return Written(int(revision))


async def save_state(
    session: AsyncSession,
    run: Run,
    state: RunState,
    *,
    finish: FinishedAttempt | None = None,
    start: NewAttempt | None = None,
) -> None:
    """:func:`write_state` under the run lock the caller holds (``run`` locked by
    :func:`lock_run` in ``session``'s transaction).

    Raises :class:`StaleAttempt` when ``finish``'s fencing token no longer holds (nothing
    was written; the caller's transaction then rolls back whatever else it did). ``run``
    is updated in memory (fields and revision) without becoming dirty. Pending ORM changes
    of the session are flushed first (a run added in this transaction must exist before
    its step rows). Nothing is written when nothing changed.
    """
    new = {name: getattr(state, name) for name in _RUN_FIELDS}
    new["status"] = state.status.value
    changed = {name: value for name, value in new.items() if getattr(run, name) != value}
    if not (state.changed or changed or state.events or finish or start):
        return
    if session.new or session.dirty:
        await session.flush()
    written = await write_state(session, run.id, state, finish=finish, start=start)
    if written.revision is None:
        raise StaleAttempt(f"attempt {finish.id if finish else '?'} is no longer current")
    for name, value in changed.items():
        set_committed_value(run, name, value)
    set_committed_value(run, "revision", written.revision)


def claim_attempt(
    state: RunState,
    step_id: str,
    *,
    run_id: uuid.UUID,
    worker: str,
    input: Any,
    config: Any,
    now: datetime,
    lease_until: datetime,
) -> NewAttempt:
    """Start a new attempt of ready step ``step_id`` in ``state`` (caller holds the run
    lock) and return it, to be written by :func:`save_state` (``start=``).

    The fencing token is random per attempt; completion must present it. The idempotency
    key ``<run id>:<step id>`` is the same for every attempt of the step.
    """
    rec = state.steps[step_id]
    rec.move(StepStatus.RUNNING)
    rec.attempts += 1
    rec.not_before = None
    if rec.started_at is None:
        rec.started_at = now
    state.touch(step_id)
    state.emit("step.started", step_id, attempt=rec.attempts, worker=worker)
    return NewAttempt(
        step_id=step_id,
        number=rec.attempts,
        fencing_token=uuid.uuid4().hex,
        idempotency_key=f"{run_id}:{step_id}",
        worker=worker,
        input=input,
        config=config,
        lease_expires_at=lease_until,
        started_at=now,
    )


async def finish_attempt(
    session: AsyncSession,
    attempt_id: int,
    fencing_token: str,
    *,
    status: str,
    output: Any,
    error: Any,
    now: datetime,
) -> bool:
    """Close attempt ``attempt_id`` if it is still running with ``fencing_token``.

    Returns False for a late or duplicate completion (the attempt was expired, cancelled or
    already finished): the caller must then discard its result.
    """
    result = await session.execute(
        _FINISH_ATTEMPT,
        {
            "attempt_id": attempt_id,
            "token": fencing_token,
            "status": status,
            "output": await payloads.store_value(session, output),
            "error": await payloads.store_value(session, error),
            "finished_at": now,
        },
    )
    return bool(getattr(result, "rowcount", 0))


async def extend_lease(
    session: AsyncSession, attempt_id: int, fencing_token: str, lease_until: datetime
) -> bool:
    """Heartbeat: push the lease of a running attempt; False when it is no longer current."""
    return await _update_current_attempt(
        session, attempt_id, fencing_token, lease_expires_at=lease_until
    )


async def _update_current_attempt(
    session: AsyncSession, attempt_id: int, fencing_token: str, **values: Any
) -> bool:
    """Conditional update of a running attempt holding ``fencing_token``; True if it matched."""
    result = await session.execute(
        update(_ATTEMPTS).where(_CURRENT_ATTEMPT).values(**values),
        {"attempt_id": attempt_id, "token": fencing_token},
    )
    return bool(getattr(result, "rowcount", 0))


_INSERT_NEW_RUN = text(
    """
    WITH wf AS (
        SELECT settings FROM workflows
        WHERE id = CAST(:workflow_id AS uuid)
          AND coalesce((settings->>'max_concurrent_runs')::numeric, 0) = 0
    ), new_run AS (
        INSERT INTO runs (id, workflow_id, version_id, version_number, status, trigger,
                          idempotency_key, input, output, error, response, created_by,
                          created_at, started_at, finished_at, deadline_at, rerun_of)
        SELECT CAST(:id AS uuid), CAST(:workflow_id AS uuid), CAST(:version_id AS uuid),
               CAST(:version_number AS int), CAST(:status AS text), CAST(:trigger AS text),
               CAST(:idempotency_key AS text), CAST(:input AS jsonb), CAST(:output AS jsonb),
               CAST(:error AS jsonb), CAST(:response AS jsonb), CAST(:created_by AS uuid),
               CAST(:created_at AS timestamptz), CAST(:started_at AS timestamptz),
               CAST(:finished_at AS timestamptz),
               CAST(:created_at AS timestamptz)
                   + (wf.settings->>'run_timeout_seconds')::float8 * interval '1 second',
               CAST(:rerun_of AS uuid)
        FROM wf
        RETURNING id
    ), new_steps AS (
        INSERT INTO step_runs (run_id, step_id, status, ports, input, output, error, attempts,
                               not_before, started_at, finished_at, data)
        SELECT new_run.id, s.step_id, s.status, s.ports, s.input, s.output, s.error,
               s.attempts, s.not_before, s.started_at, s.finished_at, s.data
        FROM new_run, jsonb_to_recordset(CAST(:steps AS jsonb)) AS s(
            step_id text, status text, ports jsonb, input jsonb, output jsonb, error jsonb,
            attempts int, not_before timestamptz, started_at timestamptz,
            finished_at timestamptz, data jsonb)
    ), new_events AS (
        INSERT INTO events (run_id, kind, step_id, data, created_at)
        SELECT new_run.id, e.kind, e.step_id, e.data, clock_timestamp()
        FROM new_run, jsonb_to_recordset(CAST(:events AS jsonb))
            AS e(kind text, step_id text, data jsonb, ord int)
        ORDER BY e.ord
    )
    SELECT id FROM new_run
    """
).columns()


def _changes(
    state: RunState, ext: payloads.Externalizer
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The changed step records (by step id) and the events (numbered ``ord`` in emit
    order) of ``state``, as the rows the ``jsonb_to_recordset`` parameters carry; large
    step values are replaced by references collected in ``ext``."""
    steps = [
        {"step_id": step_id, **step_values(state.steps[step_id])}
        for step_id in sorted(state.changed)
    ]
    ext.rows(steps, _VALUE_FIELDS)
    events = [
        {"kind": ev.kind, "step_id": ev.step_id, "data": ev.data, "ord": i}
        for i, ev in enumerate(state.events)
    ]
    return steps, events


def _json(value: Any) -> str | None:
    """JSON text for a ``CAST(... AS jsonb)`` parameter; ``None`` stays SQL NULL."""
    return None if value is None else msgspec.json.encode(value).decode()


async def insert_new_run(
    session: AsyncSession | AsyncConnection, row: dict[str, Any], state: RunState
) -> bool:
    """Insert a started run, its changed step records and its events in ONE statement,
    unless its workflow has a concurrency limit (``max_concurrent_runs``).

    ``row`` holds the run columns that are not in ``state`` (id, workflow_id, version_id,
    version_number, trigger, idempotency_key, created_by, created_at, rerun_of);
    ``created_at`` is also the start instant. The statement reads the workflow's settings
    itself: the run timeout's due time ``deadline_at`` is ``created_at`` plus
    ``run_timeout_seconds`` (none without it), and with a ``max_concurrent_runs`` nothing
    is written and the result is False (the caller then queues the run through admission,
    which locks the workflow row). True when the run was written. Raises
    ``IntegrityError`` when the idempotency key is taken. Used by the start path, where the
    state was computed in memory (a new run has no step rows to load or lock).
    """
    ext = payloads.Externalizer()
    steps, events = _changes(state, ext)
    params = {
        "input": _json(ext.value(state.input)),
        "output": _json(ext.value(state.output)),
        "error": _json(ext.value(state.error)),
    }
    await payloads.store(session, ext.payloads)
    written = (
        await session.execute(
            _INSERT_NEW_RUN,
            {
                **row,
                **params,
                "status": state.status.value,
                "response": _json(state.response),
                "started_at": state.started_at,
                "finished_at": state.finished_at,
                "steps": _json(steps),
                "events": _json(events),
            },
        )
    ).first()
    if written is None:
        return False
    state.changed.clear()
    state.events.clear()
    return True
