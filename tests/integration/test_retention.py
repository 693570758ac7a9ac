"""Retention on real PostgreSQL: each data class by age and by count, in batches, with the
append-only audit log purged only through its function
(backend/services/operations/retention.py)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.observability import metrics
from backend.runtime import Runtime
from backend.services.operations import retention, retention_report
from backend.settings import Settings
from tests.integration.audit_rows import add_row, refused
from tests.integration.retention_rows import age_runs, by_class, make_runs, rules, scalar

pytestmark = pytest.mark.integration


async def run_ids(runtime: Runtime) -> set[str]:
    async with runtime.engine.connect() as conn:
        return {str(r) for r in (await conn.execute(text("select id from runs"))).scalars()}


async def test_retention_runs_by_age_in_batches_with_steps_and_events(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    ids = await make_runs(client, runtime, 6)
    await age_runs(runtime, {ids[0]: 120, ids[1]: 100, ids[2]: 95, ids[3]: 91, ids[4]: 10})
    before = metrics.RETENTION_DELETED.labels("runs")._value.get()
    results = by_class(
        await retention.run_pass(
            runtime.sessionmaker, rules(settings, retention_runs_days=90, retention_batch=3)
        )
    )
    assert results["runs"].deleted == 4
    assert results["runs"].batches == 3  # 3 + 1 + an empty one that ends the pass
    assert await run_ids(runtime) == {ids[4], ids[5]}
    old = [uuid.UUID(i) for i in ids[:4]]
    for table in ("step_runs", "events"):
        assert (
            await scalar(runtime, f"select count(*) from {table} where run_id = any(:o)", o=old)
            == 0
        )
        assert (
            await scalar(
                runtime, f"select count(*) from {table} where run_id = :k", k=uuid.UUID(ids[4])
            )
            > 0
        )
    assert metrics.RETENTION_DELETED.labels("runs")._value.get() - before == 4
    async with runtime.engine.connect() as conn:
        passes = (
            await conn.execute(text("select data_class, deleted, error from retention_passes"))
        ).all()
        audited = (
            await conn.execute(
                text("select object_id, details from audit_log where action = 'retention.prune'")
            )
        ).all()
    assert ("runs", 4, None) in passes
    assert audited[0][0] == "runs" and audited[0][1]["deleted"] == 4


async def test_retention_runs_by_count_keeps_the_newest_and_never_touches_active_runs(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    ids = await make_runs(client, runtime, 5)
    await age_runs(runtime, {run_id: 5 - i for i, run_id in enumerate(ids)})  # ids[4] newest
    async with runtime.engine.begin() as conn:  # an old run still waiting
        await conn.execute(
            text("update runs set status = 'waiting', finished_at = null where id = :id"),
            {"id": uuid.UUID(ids[0])},
        )
    results = by_class(
        await retention.run_pass(runtime.sessionmaker, rules(settings, retention_runs_max=2))
    )
    assert results["runs"].deleted == 2
    assert await run_ids(runtime) == {ids[0], ids[3], ids[4]}


async def test_retention_clears_run_payloads_and_deletes_large_values_no_kept_run_uses(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    big = "x" * 300_000  # over the 256 KiB inline limit: stored once in payloads
    ids = await make_runs(client, runtime, 2, blob=big)
    assert await scalar(runtime, "select count(*) from payloads") >= 1
    await age_runs(runtime, {ids[0]: 40})
    results = by_class(
        await retention.run_pass(runtime.sessionmaker, rules(settings, retention_payloads_days=30))
    )
    assert results["payloads"].deleted == 1
    old, kept = uuid.UUID(ids[0]), uuid.UUID(ids[1])
    row = await scalar(
        runtime, "select input is null and output is null from runs where id = :i", i=old
    )
    assert row is True
    assert await scalar(runtime, "select status from runs where id = :i", i=old) == "succeeded"
    assert (
        await scalar(
            runtime,
            "select count(*) from step_runs where run_id = :i and output is not null",
            i=old,
        )
        == 0
    )
    assert await scalar(runtime, "select input is not null from runs where id = :i", i=kept)
    # the shared large value was last used by the kept run, 20 days ago: it stays
    await age_runs(runtime, {ids[1]: 20})
    async with runtime.engine.begin() as conn:
        await conn.execute(text("update payloads set last_used_at = now() - interval '20 days'"))
    results = by_class(
        await retention.run_pass(runtime.sessionmaker, rules(settings, retention_payloads_days=30))
    )
    assert results["large_values"].deleted == 0
    assert results["payloads"].deleted == 0  # the next pass starts where this one stopped
    # once the kept run is gone too, nothing can reference it
    await age_runs(runtime, {ids[0]: 100, ids[1]: 180})
    results = by_class(
        await retention.run_pass(
            runtime.sessionmaker,
            rules(settings, retention_payloads_days=30, retention_runs_days=90),
        )
    )
    assert results["runs"].deleted == 2
    assert results["large_values"].deleted >= 1
    assert await scalar(runtime, "select count(*) from payloads") == 0


async def test_retention_steps_drops_step_records_but_keeps_the_run(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    ids = await make_runs(client, runtime, 3)
    await age_runs(runtime, {ids[0]: 3, ids[1]: 2})
    results = by_class(
        await retention.run_pass(runtime.sessionmaker, rules(settings, retention_steps_max=1))
    )
    assert results["steps"].deleted == 2
    assert await run_ids(runtime) == set(ids)
    counts = {
        i: await scalar(runtime, "select count(*) from step_runs where run_id = :r", r=uuid.UUID(i))
        for i in ids
    }
    assert counts[ids[0]] == 0 and counts[ids[1]] == 0 and counts[ids[2]] > 0
    r = await client.get(f"/api/runs/{ids[0]}")
    assert r.status_code == 200 and r.json()["status"] == "succeeded"


async def test_retention_events_and_files_by_age_and_count(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    ids = await make_runs(client, runtime, 2)
    await age_runs(runtime, {ids[0]: 100})
    async with runtime.engine.begin() as conn:
        for days in (100, 50, 1, 0):
            await conn.execute(
                text(
                    "insert into files (id, filename, content_type, size, sha256, content,"
                    " created_at) values (gen_random_uuid(), 'a.txt', 'text/plain', 1, 'x',"
                    " 'a', now() - make_interval(days => :d))"
                ),
                {"d": days},
            )
    events_before = await scalar(runtime, "select count(*) from events")
    old_events = await scalar(
        runtime, "select count(*) from events where run_id = :r", r=uuid.UUID(ids[0])
    )
    results = by_class(
        await retention.run_pass(
            runtime.sessionmaker,
            rules(
                settings, retention_events_days=90, retention_files_days=90, retention_files_max=2
            ),
        )
    )
    assert results["events"].deleted == old_events > 0
    assert await scalar(runtime, "select count(*) from events") == events_before - old_events
    assert results["files"].deleted == 2  # one by age, one more by count
    assert await scalar(runtime, "select count(*) from files") == 2
    assert await run_ids(runtime) == set(ids)  # events go, runs stay


async def test_retention_audit_log_in_batches_through_the_purge_function(
    runtime: Runtime, settings: Settings
) -> None:
    old = [await add_row(runtime, age_days=400 + i) for i in range(5)]
    recent = await add_row(runtime, age_days=10)
    results = by_class(
        await retention.run_pass(
            runtime.sessionmaker, rules(settings, audit_retention_days=365, retention_batch=2)
        )
    )
    assert results["audit"].deleted == 5 and results["audit"].batches == 4
    async with runtime.engine.connect() as conn:
        ids = set((await conn.execute(text("select id from audit_log"))).scalars())
        purges = (
            await conn.execute(text("select details from audit_log where action = 'audit.purge'"))
        ).scalars()
        purge = [p["deleted"] for p in purges if p["keep_days"] == 365]
    assert not ids & set(old) and recent in ids
    assert sorted(purge) == [1, 2, 2]  # one audit row per batch, in its transaction
    assert "DELETE refused" in await refused(runtime, f"delete from audit_log where id = {recent}")
    assert "at least 1" in await refused(runtime, "select audit_log_purge(365, 0)")


async def test_a_failing_class_is_recorded_and_the_others_still_run(
    runtime: Runtime, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_row(runtime, age_days=400)

    async def broken(*args: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(retention, "_prune_events", broken)
    results = by_class(
        await retention.run_pass(
            runtime.sessionmaker, rules(settings, retention_events_days=1, audit_retention_days=30)
        )
    )
    assert results["events"].error == "RuntimeError: disk on fire"
    assert results["audit"].deleted == 1
    async with runtime.sessionmaker() as session:
        recent = await retention_report.recent_passes(session)
    assert {p.data_class: p.error for p in recent}["events"] == "RuntimeError: disk on fire"
