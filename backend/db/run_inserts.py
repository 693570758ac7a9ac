"""The run insert: the one way a run is inserted (a new start, a queued run under a
concurrency limit, a child run, an error-workflow run), with its step records, events and
claimed attempt when it starts at once, in ONE statement for any number of runs.

- :func:`insert_run` writes one run: in the caller's transaction (a session) or as its own
  transaction on the fast path (backend/db/fast_path.py).
- :func:`insert_queued_runs` writes many queued runs (a For-each's children) in the
  caller's transaction: one statement per :data:`QUEUED_CHUNK` runs, their shared parts
  encoded and hashed once per statement, not once per run.
- :class:`RunInserts` is how the run store's one-statement starts reach PostgreSQL: the
  runs that concurrent starts insert at the same moment are written together, one
  statement and one commit per group (backend/db/group_commit.py: at low load each run is
  its own group). A webhook's 202, or a step run eagerly, still comes only after the
  commit that stored its run.

Each run travels as one JSON object (:func:`encode_run`) in the statement's ``:runs``
array; the statement reports per run, in order, whether it was inserted and why not.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import msgspec
from sqlalchemy import BigInteger, Boolean, Integer, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db import payloads
from backend.db.fast_path import FastPath
from backend.db.group_commit import GroupCommit, numbered
from backend.db.run_writes import (
    Positional,
    attempt_values,
    state_changes,
    store_payloads,
    with_new_attempt,
)
from backend.engine.model import RunState
from backend.engine.ports import NewAttempt, NewRun
from backend.observability import metrics

# The runs of ``:runs`` (``ord``: their position) are checked against their workflow's
# stored settings (when ``check_settings``), inserted unless a run with the same id exists,
# and each inserted run gets its step records, events (in emit order, runs in ``ord``
# order) and claimed attempt. One result row per run, in ``ord`` order.
_INSERT_RUNS = text(
    with_new_attempt(
        """
    WITH r AS (
        SELECT * FROM jsonb_to_recordset(CAST(:runs AS jsonb)) AS r(
            ord int, id uuid, workflow_id uuid, version_id uuid, version_number int,
            status text, trigger text, idempotency_key text, input jsonb, output jsonb,
            error jsonb, response jsonb, created_by uuid, created_at timestamptz,
            started_at timestamptz, finished_at timestamptz, deadline_at timestamptz,
            rerun_of uuid, parent_run_id uuid, parent_step_id text, parent_index int,
            check_settings boolean, settings jsonb, steps jsonb, events jsonb,
            attempts jsonb)
    ), wf AS (
        SELECT r.ord, coalesce(w.settings, '{}'::jsonb) AS settings
        FROM r JOIN workflows w ON w.id = r.workflow_id
    ), go AS (
        SELECT r.* FROM r JOIN wf ON wf.ord = r.ord
        WHERE NOT r.check_settings OR wf.settings = r.settings
    ), new_run AS (
        INSERT INTO runs (id, workflow_id, version_id, version_number, status, trigger,
                          idempotency_key, input, output, error, response, created_by,
                          created_at, started_at, finished_at, deadline_at, rerun_of,
                          parent_run_id, parent_step_id, parent_index)
        SELECT id, workflow_id, version_id, version_number, status, trigger,
               idempotency_key, input, output, error, response, created_by,
               coalesce(created_at, now()), started_at, finished_at, deadline_at, rerun_of,
               parent_run_id, parent_step_id, parent_index
        FROM go ORDER BY ord
        ON CONFLICT (id) DO NOTHING
        RETURNING id, revision
    ), inserted AS (
        SELECT go.ord, go.id, go.steps, go.events, go.attempts, new_run.revision
        FROM go JOIN new_run ON new_run.id = go.id
    ), new_attempt AS (
        $NEW_ATTEMPT
    ), new_steps AS (
        INSERT INTO step_runs (run_id, step_id, status, ports, input, output, error, attempts,
                               not_before, started_at, finished_at, data)
        SELECT i.id, s.step_id, s.status, s.ports, s.input, s.output, s.error,
               s.attempts, s.not_before, s.started_at, s.finished_at, s.data
        FROM inserted i, jsonb_to_recordset(i.steps) AS s(
            step_id text, status text, ports jsonb, input jsonb, output jsonb, error jsonb,
            attempts int, not_before timestamptz, started_at timestamptz,
            finished_at timestamptz, data jsonb)
    ), new_events AS (
        INSERT INTO events (run_id, kind, step_id, data, created_at)
        SELECT i.id, e.kind, e.step_id, e.data, clock_timestamp()
        FROM inserted i, jsonb_to_recordset(i.events)
            AS e(kind text, step_id text, data jsonb, ord int)
        ORDER BY i.ord, e.ord
    )
    SELECT r.ord, i.id, wf.settings, go.ord IS NOT NULL AS go, i.revision,
           a.id AS attempt_id
    FROM r LEFT JOIN wf ON wf.ord = r.ord LEFT JOIN go ON go.ord = r.ord
        LEFT JOIN inserted i ON i.ord = r.ord LEFT JOIN new_attempt a ON a.run_id = i.id
    ORDER BY r.ord
    """,
        run_id="i.id",
        guard="inserted i",
        source="i.attempts",
    )
).columns(
    ord=Integer(),
    id=PG_UUID(as_uuid=True),
    settings=JSONB(),
    go=Boolean(),
    revision=BigInteger(),
    attempt_id=BigInteger(),
)
_INSERT_POSITIONAL = Positional(_INSERT_RUNS)


class Inserted(msgspec.Struct, frozen=True):
    """What the insert of one run did: ``written`` when the run row was inserted;
    ``settings_differ`` when nothing was written because the workflow's stored settings
    are not the expected ones (``settings`` then holds them; ``None``: no such workflow).
    ``attempt_id``: the id of the claimed attempt inserted with the run.
    """

    written: bool
    settings_differ: bool
    settings: dict[str, Any] | None
    revision: int | None = None  # the inserted run's revision
    attempt_id: int | None = None


def encode_run(
    new: NewRun,
    state: RunState | None,
    ext: payloads.Externalizer,
    *,
    expected_settings: dict[str, Any] | None = None,
    start: NewAttempt | None = None,
) -> bytes:
    """Run ``new`` as one JSON object of the ``:runs`` array (``ord`` set when written):
    ``queued`` without ``state``, else with its status, timings, changed step records and
    events, and ``start``. Values over the inline limit are replaced by references
    collected in ``ext`` (stored before the insert). Raises ``msgspec.EncodeError`` (or
    ``UnicodeEncodeError``) for a value JSON cannot carry."""
    steps, events = state_changes(state, ext) if state is not None else ([], [])
    return msgspec.json.encode(
        {
            "id": new.id,
            "workflow_id": new.workflow_id,
            "version_id": new.version_id,
            "version_number": new.version_number,
            "status": state.status.value if state is not None else "queued",
            "trigger": new.trigger,
            "idempotency_key": new.idempotency_key,
            "input": ext.value(new.input),
            "output": ext.value(state.output) if state is not None else None,
            "error": ext.value(state.error) if state is not None else None,
            "response": state.response if state is not None else None,
            "created_by": new.created_by,
            "created_at": new.created_at,
            "started_at": state.started_at if state is not None else None,
            "finished_at": state.finished_at if state is not None else None,
            "deadline_at": new.deadline_at,
            "rerun_of": new.rerun_of,
            "parent_run_id": new.parent_run_id,
            "parent_step_id": new.parent_step_id,
            "parent_index": new.parent_index,
            "check_settings": expected_settings is not None,
            "settings": expected_settings if expected_settings is not None else {},
            "steps": steps,
            "events": events,
            "attempts": [attempt_values(start, ext)] if start is not None else [],
        }
    )


async def insert_runs(db: AsyncSession | FastPath, runs: Sequence[bytes]) -> list[Inserted]:
    """Insert the runs encoded by :func:`encode_run` with ONE statement (in the session's
    transaction, or as its own transaction on the fast path); one :class:`Inserted` per
    run, in order. Raises ``IntegrityError`` when an idempotency key is taken (nothing is
    then written)."""
    rows = await _INSERT_POSITIONAL.fetch(db, {"runs": numbered(runs)})
    return [
        Inserted(
            written=run_id is not None,
            settings_differ=not go and settings is not None,
            settings=settings,
            revision=int(revision) if revision is not None else None,
            attempt_id=int(attempt_id) if attempt_id is not None else None,
        )
        for _ord, run_id, settings, go, revision, attempt_id in rows
    ]


def inserted(new: NewRun, state: RunState | None, start: NewAttempt | None, done: Inserted) -> None:
    """What follows a run's insert in memory: ``start.id`` is set, the metrics count the
    run and its events, and ``state``'s written changes are cleared."""
    if not done.written:
        return
    if start is not None and done.attempt_id is not None:
        start.id = done.attempt_id
    metrics.run_started(new.workflow_id, new.trigger)
    if state is not None:
        metrics.engine_events(state)
        state.changed.clear()
        state.events.clear()


async def insert_run(
    db: AsyncSession | FastPath,
    new: NewRun,
    state: RunState | None = None,
    *,
    expected_settings: dict[str, Any] | None = None,
    start: NewAttempt | None = None,
) -> Inserted:
    """Insert run ``new``: ``queued`` without ``state``; with ``state`` (computed in
    memory by the engine) its status, timings, changed step records and events too, and
    ``start``, the attempt the start claimed (its ``id`` is set), in the same statement.

    An existing run with ``new.id`` is left alone (``written`` False: child and
    error-workflow runs have deterministic ids). With ``expected_settings`` (the
    workflow's settings JSON the caller decided from) nothing is written unless they
    are still the stored ones. ``db`` is a session inside a transaction or the fast path
    (the statement is then its own transaction). Raises ``IntegrityError``
    when the idempotency key is taken. Values over the inline limit (the input, step
    values) are stored once in ``payloads`` and written as references.
    """
    ext = payloads.Externalizer(
        known=state.stored if state is not None else None, shared=new.by_reference
    )
    run = encode_run(new, state, ext, expected_settings=expected_settings, start=start)
    await store_payloads(db, ext.payloads)
    (done,) = await insert_runs(db, [run])
    inserted(new, state, start, done)
    return done


QUEUED_CHUNK = 500
"""Queued runs per statement of :func:`insert_queued_runs`: 500 children of a small body
are about 200 kB of ``:runs`` JSON, a bound on one statement's memory whatever the list's
size."""


async def insert_queued_runs(db: AsyncSession, news: Sequence[NewRun]) -> list[bool]:
    """Insert the queued runs ``news`` (no state: a For-each's or Sub-workflow's children)
    in the session's transaction, :data:`QUEUED_CHUNK` per statement; per run, in order,
    whether it was written (False: a run with its id exists). The ``by_reference`` parts
    of a chunk's runs are externalized by one :class:`~backend.db.payloads.Externalizer`,
    so a parent input shared by every child is encoded and hashed once per chunk.
    Raises ``IntegrityError`` when an idempotency key is taken (nothing of that chunk is
    then written)."""
    written: list[bool] = []
    for first in range(0, len(news), QUEUED_CHUNK):
        chunk = news[first : first + QUEUED_CHUNK]
        shared = {id(part): part for new in chunk for part in new.by_reference}
        ext = payloads.Externalizer(shared=tuple(shared.values()))
        encoded = [encode_run(new, None, ext) for new in chunk]
        await store_payloads(db, ext.payloads)
        for new, done in zip(chunk, await insert_runs(db, encoded), strict=True):
            inserted(new, None, None, done)
            written.append(done.written)
    return written


class RunInserts:
    """Run inserts on the fast path, grouped (:class:`~backend.db.group_commit.GroupCommit`):
    :meth:`insert` has :func:`insert_run`'s meaning, but runs inserted at the same moment
    by concurrent callers share one statement and one commit. ``max_in_flight``: groups
    written at the same time (each on its own connection)."""

    def __init__(self, fast: FastPath, *, max_in_flight: int = 2) -> None:
        self.fast = fast
        self.groups: GroupCommit[Inserted] = GroupCommit(
            partial(insert_runs, fast), max_in_flight=max_in_flight
        )

    async def insert(
        self,
        new: NewRun,
        state: RunState | None = None,
        *,
        expected_settings: dict[str, Any] | None = None,
        start: NewAttempt | None = None,
    ) -> Inserted:
        """:func:`insert_run` on the fast path, in a group. Raises ``IntegrityError`` when
        the idempotency key is taken (then only this run of its group is not written)."""
        ext = payloads.Externalizer(
            known=state.stored if state is not None else None, shared=new.by_reference
        )
        run = encode_run(new, state, ext, expected_settings=expected_settings, start=start)
        await store_payloads(self.fast, ext.payloads)
        done = await self.groups.submit(run)
        inserted(new, state, start, done)
        return done
