"""The statement every engine write is made of, and the parts the run insert shares.

- :func:`write_state`: everything a transition writes (the attempt it closes and the one
  it claims, the changed step records, the run row, the events) in ONE statement of
  data-modifying CTEs, under the run lock or, in autocommit, fenced by the run's revision;
  the statement takes an array of writes (:func:`encode_write`), so :class:`RunWrites`
  sends the unlocked writes of concurrent runs together (backend/db/group_commit.py).
- the row values both it and the run insert (backend/db/run_inserts.py) carry: changed
  step records, events, the claimed attempt, as JSON recordset parameters.

Events are stamped with ``clock_timestamp()`` (when written, not when the transaction
began), so the event log's timings are real. Statements are built once at import so
SQLAlchemy's compiled cache and asyncpg's prepared statements are hit every time.
Workflow settings are never interpreted here: the caller decides (deadline, whether a
run may start without admission) and passes values.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

import asyncpg
import msgspec
from sqlalchemy import text
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db import payloads
from backend.db.fast_path import FastPath
from backend.db.group_commit import GroupCommit, numbered
from backend.engine.model import RunState, StepRecord
from backend.engine.ports import FinishedAttempt, NewAttempt, WorkflowSettings, Written
from backend.observability import metrics

# Step record fields written back by write_state (all but the key columns).
STEP_FIELDS = (
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
# Step record fields that may hold large values (stored by reference, backend/db/payloads.py).
VALUE_FIELDS = ("input", "output", "error", "data")


def step_values(rec: StepRecord) -> dict[str, Any]:
    """The ``step_runs`` column values of a step record (all but the key columns)."""
    values = {name: getattr(rec, name) for name in STEP_FIELDS}
    values["status"] = rec.status.value
    values["ports"] = list(rec.ports)
    return values


def with_new_attempt(
    sql: str, *, run_id: str, guard: str, source: str = "CAST(:attempts AS jsonb)"
) -> str:
    """``sql`` with its ``$NEW_ATTEMPT`` replaced by the insert of the claimed attempt
    carried by the JSON array ``source`` (an SQL expression; by default the ``:attempts``
    recordset parameter, at most one row: :func:`attempt_values`) into run ``run_id`` (an
    SQL expression), written only when relation ``guard`` has a row (joined, so ``source``
    and ``run_id`` may name its columns). Returns the attempt's ``id`` and ``run_id``."""
    insert = f"""INSERT INTO attempts (run_id, step_id, number, fencing_token, status, worker,
                              idempotency_key, input, config, lease_expires_at, started_at)
        SELECT {run_id}, a.step_id, a.number, a.fencing_token, 'running',
               a.worker, a.idempotency_key, a.input, a.config, a.lease_expires_at,
               a.started_at
        FROM {guard}, jsonb_to_recordset({source}) AS a(
            step_id text, number int, fencing_token text, worker text,
            idempotency_key text, input jsonb, config jsonb, lease_expires_at timestamptz,
            started_at timestamptz)
        RETURNING id, run_id"""
    return sql.replace("$NEW_ATTEMPT", insert)


# One statement for every write of an engine transaction (docs/engine.md, "Performance"),
# for one run or a group of runs (backend/db/group_commit.py): close the finished attempt
# (fenced), insert the claimed attempt, write the changed step records, update the run
# row (bumping its revision), append the events. Nothing is written for a run unless its
# row is at the expected revision (when one is given; the row is locked by the check, the
# runs of a group in id order) and its finished attempt's fencing token still holds. Of
# two writes of one run in a group only the first (by ``ord``) may be written: the other
# finds the run moved, as it would have after the first's commit.
# Changed step records are updated where they exist and inserted where not (a plain
# UPDATE and INSERT, not INSERT ... ON CONFLICT: under the run's row lock no other
# transaction writes the run's step records, so the speculative insertion's row lock and
# confirmation, two WAL records per step, bought nothing; a step record inserted by
# someone else would fail the statement on the unique key rather than be merged).
# Row estimate: PostgreSQL estimates any jsonb_to_recordset at 100 rows, so it joined
# ``runs`` (the revision check) and ``step_runs`` (the update) by hashing those 100 rows
# against a sequential scan of the whole table: every write read every run and step row
# (a cached plan made while the tables were small keeps that choice as they grow), the
# cost of a write grew with the table, and a For-each of 10,000 items spent most of its
# PostgreSQL time there (docs/engine.md, "For-each at scale"). The always-true range
# condition ``BETWEEN 0 AND 2147483647`` on the writes' ``ord`` and the step records'
# ordinality is estimated with PostgreSQL's default range selectivity (0.5 %, no
# statistics on a function's result), i.e. one row: the joins are index lookups.
_SAVE = text(
    with_new_attempt(
        """
    WITH w AS (
        SELECT * FROM jsonb_to_recordset(CAST(:writes AS jsonb)) AS w(
            ord int, run_id uuid, expected bigint, fin_id bigint, fin_token text,
            fin_status text, fin_output jsonb, fin_error jsonb, fin_at timestamptz,
            attempts jsonb, steps jsonb, events jsonb, status text, output jsonb,
            error jsonb, response jsonb, started_at timestamptz, finished_at timestamptz,
            deadline_at timestamptz, ended boolean)
        WHERE w.ord BETWEEN 0 AND 2147483647  -- row estimate: see above
    ), first AS (
        SELECT DISTINCT ON (run_id) ord, run_id, expected FROM w ORDER BY run_id, ord
    ), at_revision AS (
        SELECT first.ord FROM runs JOIN first ON runs.id = first.run_id
        WHERE first.expected IS NULL OR runs.revision = first.expected
        ORDER BY runs.id
        FOR UPDATE OF runs
    ), fin AS (
        UPDATE attempts a
        SET status = w.fin_status, output = w.fin_output, error = w.fin_error,
            finished_at = w.fin_at
        FROM w JOIN at_revision r ON r.ord = w.ord
        WHERE a.id = w.fin_id AND a.fencing_token = w.fin_token AND a.status = 'running'
        RETURNING w.ord
    ), go AS (
        SELECT w.* FROM w JOIN at_revision r ON r.ord = w.ord
        WHERE w.fin_id IS NULL OR w.ord IN (SELECT ord FROM fin)
    ), new_attempt AS (
        $NEW_ATTEMPT
    ), steps AS (
        SELECT go.run_id, s.* FROM go, ROWS FROM (jsonb_to_recordset(go.steps) AS (
            step_id text, status text, ports jsonb, input jsonb, output jsonb, error jsonb,
            attempts int, not_before timestamptz, started_at timestamptz,
            finished_at timestamptz, data jsonb)) WITH ORDINALITY AS s(
            step_id, status, ports, input, output, error, attempts, not_before, started_at,
            finished_at, data, n)
        WHERE s.n BETWEEN 0 AND 2147483647  -- row estimate: see above
    ), updated_steps AS (
        UPDATE step_runs t
        SET status = s.status, ports = s.ports, input = s.input, output = s.output,
            error = s.error, attempts = s.attempts, not_before = s.not_before,
            started_at = s.started_at, finished_at = s.finished_at, data = s.data
        FROM steps s
        WHERE t.run_id = s.run_id AND t.step_id = s.step_id
        RETURNING t.run_id, t.step_id
    ), new_steps AS (
        INSERT INTO step_runs (run_id, step_id, status, ports, input, output, error, attempts,
                               not_before, started_at, finished_at, data)
        SELECT s.run_id, s.step_id, s.status, s.ports, s.input, s.output,
               s.error, s.attempts, s.not_before, s.started_at, s.finished_at, s.data
        FROM steps s
        WHERE (s.run_id, s.step_id) NOT IN (SELECT run_id, step_id FROM updated_steps)
    ), run_row AS (
        UPDATE runs
        SET status = go.status, output = go.output, error = go.error,
            response = go.response, started_at = go.started_at,
            finished_at = go.finished_at,
            deadline_at = coalesce(go.deadline_at, runs.deadline_at),
            revision = runs.revision + 1
        FROM go
        WHERE runs.id = go.run_id
        RETURNING go.ord, runs.revision, runs.workflow_id
    ), new_events AS (
        INSERT INTO events (run_id, kind, step_id, data, created_at)
        SELECT go.run_id, e.kind, e.step_id, e.data, clock_timestamp()
        FROM go, jsonb_to_recordset(go.events)
            AS e(kind text, step_id text, data jsonb, ord int)
        ORDER BY go.ord, e.ord
    )
    SELECT w.ord, r.ord IS NOT NULL AS at_revision, go.ord IS NOT NULL AS written,
           a.id AS attempt_id, rr.revision,
           (SELECT coalesce(wf.settings, '{}'::jsonb) FROM workflows wf
            WHERE wf.id = rr.workflow_id AND w.ended) AS settings
    FROM w LEFT JOIN at_revision r ON r.ord = w.ord LEFT JOIN go ON go.ord = w.ord
        LEFT JOIN new_attempt a ON a.run_id = go.run_id LEFT JOIN run_row rr ON rr.ord = w.ord
    ORDER BY w.ord
    """,
        run_id="go.run_id",
        guard="go",
        source="go.attempts",
    )
).columns()
# The hottest statements (every engine write, every run start) go to asyncpg directly on
# the fast path (backend/db/fast_path.py; SQLAlchemy's execute path costs ~0.2 ms of CPU
# per call here): compiled once to asyncpg's positional form; asyncpg prepares each once
# per connection. JSON parameters
# are JSON text, as SQLAlchemy's jsonb codec on the connection expects (it also decodes
# jsonb results with msgspec).


class Positional:
    """A ``text()`` statement compiled once to asyncpg's ``$n`` form, with the order of
    its named parameters."""

    def __init__(self, statement: Any) -> None:
        compiled = statement.compile(dialect=asyncpg_dialect())
        self.statement = statement
        self.sql = str(compiled)
        self.names = tuple(compiled.positiontup or ())
        # parameters the statement fixes itself (a literal compared in a WHERE clause)
        self.fixed = {
            name: bind.effective_value
            for name, bind in compiled.binds.items()
            if not bind.required and bind.callable is None
        }

    async def fetchrow(self, db: AsyncSession | FastPath, params: dict[str, Any]) -> Any:
        """Run the statement and return its first row (``None``: no rows): through the
        session inside its transaction, or on the fast path as its own transaction.

        Either way a violated constraint raises SQLAlchemy's ``IntegrityError`` (asyncpg's
        own error is its ``orig``), as callers such as the idempotency key check expect."""
        if isinstance(db, AsyncSession):
            return (await db.execute(self.statement, params)).first()
        values = [params[name] if name in params else self.fixed[name] for name in self.names]
        try:
            return await db.fetchrow(self.sql, *values)
        except asyncpg.IntegrityConstraintViolationError as exc:
            raise IntegrityError(self.sql, values, exc) from exc

    async def fetch(self, db: AsyncSession | FastPath, params: dict[str, Any]) -> list[Any]:
        """Like :meth:`fetchrow`, all the rows."""
        if isinstance(db, AsyncSession):
            return list((await db.execute(self.statement, params)).all())
        values = [params[name] if name in params else self.fixed[name] for name in self.names]
        try:
            return await db.fetch(self.sql, *values)
        except asyncpg.IntegrityConstraintViolationError as exc:
            raise IntegrityError(self.sql, values, exc) from exc


_SAVE_POSITIONAL = Positional(_SAVE)


async def store_payloads(
    db: AsyncSession | FastPath, found: dict[str, payloads.StoredPayload]
) -> None:
    """:func:`backend.db.payloads.store` in the session's transaction, or on its own
    autocommit connection for the fast path (then the references are written after the
    payloads are committed, as with any autocommit statement pair)."""
    if not found:
        return
    if isinstance(db, AsyncSession):
        await payloads.store(db, found)
        return
    async with db.connection() as conn:
        await payloads.store(conn, found)


def encode_write(
    run_id: uuid.UUID,
    state: RunState,
    ext: payloads.Externalizer,
    *,
    finish: FinishedAttempt | None = None,
    start: NewAttempt | None = None,
    expected_revision: int | None = None,
    deadline_at: datetime | None = None,
) -> bytes:
    """The write of ``state`` as one JSON object of the ``:writes`` array (``ord`` set
    when sent; see :func:`write_state`). Values over the inline limit are replaced by
    references collected in ``ext`` (stored before the write)."""
    steps, events = state_changes(state, ext)
    return msgspec.json.encode(
        {
            "run_id": run_id,
            "expected": expected_revision,
            "fin_id": finish.id if finish else None,
            "fin_token": finish.fencing_token if finish else None,
            "fin_status": finish.status if finish else None,
            "fin_output": ext.value(finish.output) if finish else None,
            "fin_error": ext.value(finish.error) if finish else None,
            "fin_at": finish.finished_at if finish else None,
            "attempts": [attempt_values(start, ext)] if start is not None else [],
            "steps": steps,
            "events": events,
            "status": state.status.value,
            "output": ext.value(state.output),
            "error": ext.value(state.error),
            "response": state.response,
            "started_at": state.started_at,
            "finished_at": state.finished_at,
            "deadline_at": deadline_at,
            "ended": state.status.terminal,
        }
    )


class Saved(msgspec.Struct, frozen=True):
    """What the statement did for one write: ``at_revision`` (the run was found at the
    expected revision), ``written``, the claimed attempt's id, the run's new revision and,
    for a write that ended the run, the workflow's settings."""

    at_revision: bool
    written: bool
    attempt_id: int | None
    revision: int | None
    settings: dict[str, Any] | None


async def write_states(db: AsyncSession | FastPath, writes: Sequence[bytes]) -> list[Saved]:
    """Run the writes encoded by :func:`encode_write` with ONE statement (in the session's
    transaction, or as its own transaction on the fast path); one :class:`Saved` per
    write, in order."""
    rows = await _SAVE_POSITIONAL.fetch(db, {"writes": numbered(writes)})
    return [
        Saved(bool(at_revision), bool(written), attempt_id, revision, settings)
        for _ord, at_revision, written, attempt_id, revision, settings in rows
    ]


def saved(state: RunState, start: NewAttempt | None, done: Saved) -> Written:
    """The outcome of a write of ``state`` (see :func:`write_state`): ``start.id`` is set,
    the metrics count the events and ``state``'s written changes are cleared."""
    if not done.written:
        return Written(None, moved=not done.at_revision)
    if start is not None and done.attempt_id is not None:
        start.id = int(done.attempt_id)
    metrics.engine_events(state)
    state.changed.clear()
    state.events.clear()
    ended = WorkflowSettings.from_raw(done.settings) if state.status.terminal else None
    assert done.revision is not None
    return Written(int(done.revision), settings=ended)


async def write_state(
    db: AsyncSession | FastPath,
    run_id: uuid.UUID,
    state: RunState,
    *,
    finish: FinishedAttempt | None = None,
    start: NewAttempt | None = None,
    expected_revision: int | None = None,
    deadline_at: datetime | None = None,
) -> Written:
    """Write the changed step records, the run fields and the events of ``state``,
    closing ``finish`` and inserting ``start`` (its ``id`` is set), in ONE statement.

    ``db`` is a session inside the transaction that holds the run lock, or the fast path
    (backend/db/fast_path.py: the statement is its own transaction, sent to asyncpg).
    With ``expected_revision`` the write happens only if the run row is still at that
    revision (optimistic: used in autocommit); without it the caller holds the run lock.
    On success the run's revision is bumped and ``state.changed`` / ``state.events`` are
    cleared; when ``state`` ends the run, the same statement reads the workflow's settings
    (``Written.settings``: the run's end frees a concurrency slot). Otherwise nothing is
    written and ``state`` is left as it was. Values over the inline limit are stored once
    in ``payloads`` and written as references.
    """
    ext = payloads.Externalizer(known=state.stored)
    write = encode_write(
        run_id,
        state,
        ext,
        finish=finish,
        start=start,
        expected_revision=expected_revision,
        deadline_at=deadline_at,
    )
    await store_payloads(db, ext.payloads)
    (done,) = await write_states(db, [write])
    return saved(state, start, done)


class RunWrites:
    """Unlocked writes on the fast path, grouped
    (:class:`~backend.db.group_commit.GroupCommit`): :meth:`write` has
    :func:`write_state`'s meaning with ``expected_revision``, but writes of different runs
    made at the same moment by concurrent callers share one statement and one commit."""

    def __init__(self, fast: FastPath, *, max_in_flight: int = 2) -> None:
        self.fast = fast
        self.groups: GroupCommit[Saved] = GroupCommit(
            partial(write_states, fast), max_in_flight=max_in_flight
        )

    async def write(
        self,
        run_id: uuid.UUID,
        state: RunState,
        *,
        finish: FinishedAttempt | None,
        start: NewAttempt | None,
        expected_revision: int,
    ) -> Written:
        """:func:`write_state` fenced by ``expected_revision``, in a group."""
        ext = payloads.Externalizer(known=state.stored)
        write = encode_write(
            run_id, state, ext, finish=finish, start=start, expected_revision=expected_revision
        )
        await store_payloads(self.fast, ext.payloads)
        return saved(state, start, await self.groups.submit(write))


def attempt_values(start: NewAttempt, ext: payloads.Externalizer) -> dict[str, Any]:
    """The row of claimed attempt ``start`` as the ``:attempts`` recordset parameter of
    the write and insert statements carries it (large values by reference in ``ext``)."""
    return {
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


def state_changes(
    state: RunState, ext: payloads.Externalizer
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The changed step records (by step id) and the events (numbered ``ord`` in emit
    order) of ``state``, as the rows the ``jsonb_to_recordset`` parameters carry; large
    step values are replaced by references collected in ``ext``."""
    steps = [
        {"step_id": step_id, **step_values(state.steps[step_id])}
        for step_id in sorted(state.changed)
    ]
    ext.rows(steps, VALUE_FIELDS)
    events = [
        {"kind": ev.kind, "step_id": ev.step_id, "data": ev.data, "ord": i}
        for i, ev in enumerate(state.events)
    ]
    return steps, events
