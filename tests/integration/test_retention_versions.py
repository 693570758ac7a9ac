"""Retention of workflow versions on real PostgreSQL: old published versions go in batches,
except the active one, draft snapshots, and versions a kept run, the schedule or a call
step still needs (backend/services/operations/retention_versions.py)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.operations import retention
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.retention_rows import age_runs, by_class, rules, scalar

pytestmark = pytest.mark.integration


async def publish(client: httpx.AsyncClient, wid: str, n: int) -> None:
    """Publish a new version of ``wid`` (its Set step writes ``n``)."""
    d = diagram(
        [node("start", "trigger.manual"), node("set_1", "control.set", mapping={"n": n})],
        [edge("start", "set_1")],
    )
    assert (await client.put(f"/api/workflows/{wid}/draft", json={"diagram": d})).json()["ok"]
    assert (await client.post(f"/api/workflows/{wid}/publish")).status_code == 201


async def versions(runtime: Runtime, wid: str) -> list[int]:
    """The version numbers of ``wid`` left (draft snapshots as 0)."""
    async with runtime.engine.connect() as conn:
        found = await conn.execute(
            text("select number from workflow_versions where workflow_id = :w order by number"),
            {"w": uuid.UUID(wid)},
        )
        return list(found.scalars())


async def setup_versions(client: httpx.AsyncClient, runtime: Runtime) -> tuple[str, str]:
    """Workflow A with versions 1-6, six years old, version 1 run once (the run kept),
    version 2 pinned by workflow B's Sub-workflow step, version 3 by A's schedule, a draft
    snapshot; version 6 active. Returns (A's id, the run's id)."""
    wid = (await client.post("/api/workflows", json={"name": "Versioned"})).json()["id"]
    await publish(client, wid, 1)
    r = await client.post(f"/api/workflows/{wid}/runs", json={"input": {}})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    for n in range(2, 7):
        await publish(client, wid, n)
    caller = diagram(
        [
            node("start", "trigger.manual"),
            node("call", "control.subworkflow", workflow_id=wid, version=2),
        ],
        [edge("start", "call")],
    )
    b = (await client.post("/api/workflows", json={"name": "Caller"})).json()["id"]
    w = uuid.UUID(wid)
    async with runtime.engine.begin() as conn:
        await conn.execute(
            text("update workflows set draft = cast(:d as jsonb) where id = :b"),
            {"d": json.dumps(caller), "b": uuid.UUID(b)},
        )
        await conn.execute(
            text(
                "insert into schedules (id, workflow_id, version_number, definition, revision,"
                " enabled, anchor_at) values (gen_random_uuid(), :w, 3, '{}', 1, true, now())"
            ),
            {"w": w},
        )
        await conn.execute(
            text(
                "insert into workflow_versions (id, workflow_id, number, diagram, graph,"
                " content_hash, kind) values (gen_random_uuid(), :w, 0, '{}', '{}', 'snap',"
                " 'draft')"
            ),
            {"w": w},
        )
        await conn.execute(
            text(
                "update workflow_versions set created_at = now() - interval '6 years'"
                " where workflow_id = :w"
            ),
            {"w": w},
        )
    return wid, run_id


async def test_retention_versions_by_age_keeps_what_is_still_needed(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    wid, run_id = await setup_versions(client, runtime)
    results = by_class(
        await retention.run_pass(
            runtime.sessionmaker,
            rules(settings, retention_versions_days=1826, retention_batch=1),
        )
    )
    assert results["versions"].deleted == 2  # versions 4 and 5
    assert results["versions"].batches == 3  # one version a batch, then an empty one
    assert results["versions"].error is None
    assert await versions(runtime, wid) == [0, 1, 2, 3, 6]
    audited = await scalar(
        runtime,
        "select details ->> 'deleted' from audit_log where action = 'retention.prune'"
        " and object_id = 'versions'",
    )
    assert audited == "2"
    # once its run is gone (the runs class goes first in a pass), version 1 goes too
    await age_runs(runtime, {run_id: 100})
    results = by_class(
        await retention.run_pass(
            runtime.sessionmaker,
            rules(settings, retention_versions_days=1826, retention_runs_days=90),
        )
    )
    assert results["runs"].deleted == 1 and results["versions"].deleted == 1
    assert await versions(runtime, wid) == [0, 2, 3, 6]


async def test_retention_versions_young_ones_stay_and_the_count_rule_keeps_the_newest(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    wid = (await client.post("/api/workflows", json={"name": "Young"})).json()["id"]
    for n in range(1, 6):
        await publish(client, wid, n)
    by_age = by_class(
        await retention.run_pass(
            runtime.sessionmaker, rules(settings, retention_versions_days=1826)
        )
    )
    assert by_age["versions"].deleted == 0
    assert await versions(runtime, wid) == [1, 2, 3, 4, 5]
    by_count = by_class(
        await retention.run_pass(runtime.sessionmaker, rules(settings, retention_versions_max=2))
    )
    assert by_count["versions"].deleted == 3
    assert await versions(runtime, wid) == [4, 5]
    assert by_count["versions"].max_rows == 2


def test_retention_versions_default_is_five_years() -> None:
    assert Settings().retention_versions_days == 1826
    assert retention.rules(Settings())["versions"].active
