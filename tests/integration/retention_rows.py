"""Helpers of the retention tests: rules with everything else off, runs made and aged."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import msgspec
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.operations import retention
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run

OFF = {
    "retention_runs_days": 0,
    "retention_events_days": 0,
    "retention_deliveries_days": 0,
    "retention_files_days": 0,
    "retention_versions_days": 0,
    "audit_retention_days": 0,
}


def rules(settings: Settings, **changes: Any) -> Settings:
    """``settings`` with every retention rule off but ``changes``."""
    return msgspec.structs.replace(settings, **{**OFF, **changes})


async def make_runs(
    client: httpx.AsyncClient, runtime: Runtime, count: int, **input: Any
) -> list[str]:
    """Publish a manual-trigger workflow and run it ``count`` times to success."""
    d = diagram(
        [
            node("start", "trigger.manual"),
            node("set_1", "control.set", mapping={"echo": "=$", "n": 1}),
        ],
        [edge("start", "set_1")],
    )
    wf = (await client.post("/api/workflows", json={"name": "Retained"})).json()
    assert (await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})).json()["ok"]
    assert (await client.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    ids = []
    for i in range(count):
        r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"i": i, **input}})
        assert r.status_code == 201, r.text
        ids.append(r.json()["run_id"])
    for run_id in ids:
        assert await wait_for_run(runtime, run_id) == "succeeded"
    return ids


async def age_runs(runtime: Runtime, days_by_run: dict[str, float]) -> None:
    """Move runs (and their events) ``days`` into the past."""
    async with runtime.engine.begin() as conn:
        for run_id, days in days_by_run.items():
            params = {"id": uuid.UUID(run_id), "d": days}
            await conn.execute(
                text(
                    "update runs set created_at = created_at - make_interval(secs => :d * 86400),"
                    " finished_at = finished_at - make_interval(secs => :d * 86400)"
                    " where id = :id"
                ),
                params,
            )
            await conn.execute(
                text(
                    "update events set created_at = created_at"
                    " - make_interval(secs => :d * 86400) where run_id = :id"
                ),
                params,
            )


async def scalar(runtime: Runtime, sql: str, **params: Any) -> Any:
    """The first column of the first row of ``sql``."""
    async with runtime.engine.connect() as conn:
        return (await conn.execute(text(sql), params)).scalar()


def by_class(results: list[retention.PassResult]) -> dict[str, retention.PassResult]:
    """A pass's results by data class."""
    return {r.data_class: r for r in results}
