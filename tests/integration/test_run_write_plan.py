"""The engine's write statement (backend/db/run_writes.py) finds the rows it writes by
index, whatever the size of the tables: PostgreSQL estimates a ``jsonb_to_recordset`` at
100 rows, and with that estimate it hashed the writes against a sequential scan of
``runs`` and ``step_runs``, so each write read every run and step row (docs/engine.md,
"For-each at scale")."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.db.run_writes import _SAVE
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish, start_manual

pytestmark = pytest.mark.integration

_MORE_RUNS = text(
    """
    INSERT INTO runs (id, workflow_id, version_id, version_number, status, trigger, input)
    SELECT gen_random_uuid(), r.workflow_id, r.version_id, r.version_number, 'succeeded',
           r.trigger, r.input
    FROM runs r, generate_series(1, 3000) WHERE r.id = :run_id
    """
)
_MORE_STEPS = text(
    """
    INSERT INTO step_runs (run_id, step_id, status, ports, attempts)
    SELECT id, 'start', 'succeeded', '[]'::jsonb, 1 FROM runs WHERE workflow_id = :wf
        AND id <> :run_id
    """
)


def _scans(plan: Any) -> set[tuple[str, str]]:
    """``(node type, relation)`` of every node of an ``EXPLAIN (FORMAT JSON)`` plan that
    reads a table."""
    found: set[tuple[str, str]] = set()
    stack = [plan]
    while stack:
        node_ = stack.pop()
        if isinstance(node_, dict):
            if "Relation Name" in node_:
                found.add((node_["Node Type"], node_["Relation Name"]))
            stack.extend(node_.values())
        elif isinstance(node_, list):
            stack.extend(node_)
    return found


async def test_an_engine_write_reads_its_rows_by_index(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("s", "control.set", mapping={"a": "=1"})],
            [edge("start", "s")],
        ),
    )
    run_id = await start_manual(client, wf, {})
    write = {
        "ord": 0,
        "run_id": run_id,
        "expected": None,
        "attempts": [],
        "steps": [{"step_id": "s", "status": "succeeded", "ports": [], "attempts": 1}],
        "events": [],
        "status": "succeeded",
        "ended": False,
    }
    async with runtime.sessionmaker() as session, session.begin():
        # tables of a few thousand rows (rolled back): large enough that a lookup by
        # index beats reading the table, small next to a real installation's
        params = {"run_id": uuid.UUID(run_id), "wf": uuid.UUID(wf["id"])}
        await session.execute(_MORE_RUNS, params)
        await session.execute(_MORE_STEPS, params)
        plan = (
            await session.execute(
                text("EXPLAIN (FORMAT JSON) " + _SAVE.element.text),
                {"writes": json.dumps([write])},
            )
        ).scalar_one()
        await session.rollback()
    scans = _scans(plan)
    read = {relation for _, relation in scans}
    assert {"runs", "step_runs"} <= read, scans
    assert not {s for s in scans if s[0] == "Seq Scan" and s[1] in ("runs", "step_runs")}, scans
