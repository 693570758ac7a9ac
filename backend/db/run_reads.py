"""The unlocked read of a run (:meth:`~backend.engine.ports.RunStore.read_unlocked`) in
ONE statement, on asyncpg directly.

The worker reads a run without its lock to claim the run's first action step (the
run writer's read basis, backend/services/runs/execution/writer.py). :func:`read_run`
fetches the run row and its step records together: the step records come back as one
array of anonymous records (``array_agg(ROW(...))``), which asyncpg decodes in its
binary protocol (timestamps as ``datetime``, ``jsonb`` through the connection's msgspec
codec). The row and the steps
are read in one snapshot, so the state is consistent; the write that follows is still
fenced by the row's revision. asyncpg prepares the statement once per connection (its
statement cache), and a connection the server closed is replaced at the pool's next
checkout (backend/db/engine.py, backend/db/fast_path.py). Values stored by reference
(backend/db/payloads.py) are read back in full; that costs a statement only when the run
holds a reference.
"""

from __future__ import annotations

import contextlib
import types
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

from backend.db.fast_path import FastPath
from backend.db.models import Run
from backend.db.run_state import build_state, run_row
from backend.db.run_writes import STEP_FIELDS
from backend.db.unread_input import unread_input
from backend.engine.model import RunState, StepRecord
from backend.engine.ports import RunRow
from backend.engine.states import StepStatus
from designer_schema.graph import WorkflowGraph

# The run columns RunRow and RunState are made of.
RUN_COLUMNS = (
    "id",
    "workflow_id",
    "version_id",
    "version_number",
    "status",
    "trigger",
    "input",
    "output",
    "error",
    "response",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
    "deadline_at",
    "parent_run_id",
    "revision",
)
STEP_COLUMNS = ("step_id", *STEP_FIELDS)

_READ_RUN = f"""
    SELECT {", ".join(f"r.{name}" for name in RUN_COLUMNS)},
           (SELECT array_agg(ROW({", ".join(f"s.{name}" for name in STEP_COLUMNS)}))
            FROM step_runs s WHERE s.run_id = r.id) AS steps
    FROM runs r
    WHERE r.id = $1
"""


def step_records(rows: list[tuple[Any, ...]] | None) -> dict[str, StepRecord]:
    """Step records by step id from the step tuples of :data:`_READ_RUN` (fields in
    :data:`STEP_COLUMNS` order; ``None``: the run has no step records)."""
    records: dict[str, StepRecord] = {}
    for row in rows or ():
        fields = dict(zip(STEP_COLUMNS, row, strict=True))
        fields["status"] = StepStatus(fields["status"])
        fields["ports"] = tuple(fields["ports"] or ())
        records[row[0]] = StepRecord(**fields)
    return records


async def read_run(
    fast: FastPath,
    run_id: uuid.UUID,
    graph_of: Callable[[uuid.UUID], Awaitable[WorkflowGraph]] | None = None,
) -> tuple[RunRow, RunState] | None:
    """The run row and its state without child runs, read on the fast path (see
    :meth:`~backend.engine.ports.RunStore.read_unlocked`) with ONE statement. ``None``
    when the run does not exist. With ``graph_of`` (a version id's graph) the parts of
    the run input its graph cannot see stay unread (backend/db/unread_input.py).
    asyncpg's errors propagate as they are (backend/services/availability.py
    classifies a lost connection)."""
    found = await fast.fetchrow(_READ_RUN, run_id)
    if found is None:
        return None
    columns = dict(zip(RUN_COLUMNS, found, strict=False))
    run = cast(Run, types.SimpleNamespace(**columns))  # the ORM entity's column attributes
    records = step_records(found["steps"])
    unread = None
    if graph_of is not None and isinstance(run.input, dict):
        with contextlib.suppress(LookupError):  # a version gone: read everything
            unread = unread_input(await graph_of(run.version_id), run.input)
    async with fast.connection() as db:  # opened only when a value is stored by reference
        state = await build_state(db, run, records, {}, resolve_steps=True, unread=unread)
    return run_row(run), state
