"""The statement every engine write is made of, and the parts the run insert shares.

- :func:`write_state`: everything a transition writes (the attempt it closes and the one
  it claims, the changed step records, the run row, the events) in ONE statement of
  data-modifying CTEs, under the run lock or, in autocommit, fenced by the run's revision.
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
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from sqlalchemy import text
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db import payloads
from backend.db.fast_path import FastPath
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


# One statement for every write of an engine transaction (docs/engine.md, "Performance"):
# close the finished attempt (fenced), insert the claimed attempt, write the changed step
# records, update the run row (bumping its revision), append the events. Nothing is
# written unless the run row is at the expected revision (when one is given; the row is
# locked by the check) and the finished attempt's fencing token still holds.
# Changed step records are updated where they exist and inserted where not (a plain
# UPDATE and INSERT, not INSERT ... ON CONFLICT: under the run's row lock no other
# transaction writes the run's step records, so the speculative insertion's row lock and
# confirmation, two WAL records per step, bought nothing; a step record inserted by
# someone else would fail the statement on the unique key rather than be merged).
_SAVE = text(
    with_new_attempt(
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
        $NEW_ATTEMPT
    ), steps AS (
        SELECT s.* FROM go, jsonb_to_recordset(CAST(:steps AS jsonb)) AS s(
            step_id text, status text, ports jsonb, input jsonb, output jsonb, error jsonb,
            attempts int, not_before timestamptz, started_at timestamptz,
            finished_at timestamptz, data jsonb)
    ), updated_steps AS (
        UPDATE step_runs t
        SET status = s.status, ports = s.ports, input = s.input, output = s.output,
            error = s.error, attempts = s.attempts, not_before = s.not_before,
            started_at = s.started_at, finished_at = s.finished_at, data = s.data
        FROM steps s
        WHERE t.run_id = CAST(:run_id AS uuid) AND t.step_id = s.step_id
        RETURNING t.step_id
    ), new_steps AS (
        INSERT INTO step_runs (run_id, step_id, status, ports, input, output, error, attempts,
                               not_before, started_at, finished_at, data)
        SELECT CAST(:run_id AS uuid), s.step_id, s.status, s.ports, s.input, s.output,
               s.error, s.attempts, s.not_before, s.started_at, s.finished_at, s.data
        FROM steps s
        WHERE s.step_id NOT IN (SELECT step_id FROM updated_steps)
    ), run_row AS (
        UPDATE runs
        SET status = CAST(:status AS text), output = CAST(:output AS jsonb),
            error = CAST(:error AS jsonb), response = CAST(:response AS jsonb),
            started_at = CAST(:started_at AS timestamptz),
            finished_at = CAST(:finished_at AS timestamptz),
            deadline_at = coalesce(CAST(:deadline_at AS timestamptz), runs.deadline_at),
            revision = runs.revision + 1
        FROM go
        WHERE runs.id = CAST(:run_id AS uuid)
        RETURNING runs.revision, runs.workflow_id
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
           (SELECT revision FROM run_row) AS revision,
           (SELECT coalesce(w.settings, '{}'::jsonb)
            FROM run_row JOIN workflows w ON w.id = run_row.workflow_id
            WHERE CAST(:ended AS boolean)) AS settings
    """,
        run_id="CAST(:run_id AS uuid)",
        guard="go",
    )
).columns()
# The hottest statements (every engine write, every run start) go to asyncpg directly on
# the fast path (backend/db/fast_path.py; SQLAlchemy's execute path costs ~0.2 ms of CPU
# per call here): compiled once to asyncpg's positional form; asyncpg prepares each once
# per connection. JSON parameters
# are JSON text, as SQLAlchemy's jsonb codec on the connection expects (it also decodes
# jsonb results with msgspec).
_RUN_FIELDS = ("status", "output", "error", "response", "started_at", "finished_at")


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
    ext = payloads.Externalizer()
    steps, events = state_changes(state, ext)
    attempts = [attempt_values(start, ext)] if start is not None else []
    params: dict[str, Any] = {
        "run_id": run_id,
        "expected": expected_revision,
        "fin_id": finish.id if finish else None,
        "fin_token": finish.fencing_token if finish else None,
        "fin_status": finish.status if finish else None,
        "fin_output": json_param(ext.value(finish.output)) if finish else None,
        "fin_error": json_param(ext.value(finish.error)) if finish else None,
        "fin_at": finish.finished_at if finish else None,
        "attempts": json_param(attempts),
        "steps": json_param(steps),
        "events": json_param(events),
        "status": state.status.value,
        "output": json_param(ext.value(state.output)),
        "error": json_param(ext.value(state.error)),
        "response": json_param(state.response),
        "started_at": state.started_at,
        "finished_at": state.finished_at,
        "deadline_at": deadline_at,
        "ended": state.status.terminal,
    }
    await store_payloads(db, ext.payloads)
    row = await _SAVE_POSITIONAL.fetchrow(db, params)
    at_revision, written, attempt_id, revision, settings = row
    if not written:
        return Written(None, moved=not at_revision)
    if start is not None:
        start.id = int(attempt_id)
    metrics.engine_events(state)
    state.changed.clear()
    state.events.clear()
    ended = WorkflowSettings.from_raw(settings) if state.status.terminal else None
    return Written(int(revision), settings=ended)


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


def json_param(value: Any) -> str | None:
    """JSON text for a ``CAST(... AS jsonb)`` parameter; ``None`` stays SQL NULL."""
    return None if value is None else msgspec.json.encode(value).decode()
