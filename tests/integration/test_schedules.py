"""Schedules on real PostgreSQL driven by a fake clock: DST, exactly-once with two
schedulers, catch-up after downtime, changes taking effect, publish validation, preview."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime, build_runtime
from backend.services.triggers.schedule_firing import fire_due
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.fake_clock import FakeClock, resync
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def scheduled(**config: Any) -> dict[str, Any]:
    return diagram(
        [
            node("tick", "trigger.schedule", **config),
            node("set_1", "control.set", mapping={"at": "=scheduled_at"}),
        ],
        [edge("tick", "set_1")],
    )


async def publish_at(
    client: httpx.AsyncClient, runtime: Runtime, clock: FakeClock, **config: Any
) -> dict[str, Any]:
    """Publish, then move the schedule's anchor and next fire to the fake clock's now."""
    wf = await publish(client, scheduled(**config))
    await resync(runtime, clock)
    return wf


async def fired(runtime: Runtime) -> list[datetime]:
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(text("select fire_at from schedule_fires order by fire_at"))
        return [r[0] for r in rows]


async def drive(runtime: Runtime, clock: FakeClock, until: datetime, step: float) -> None:
    while clock.now() < until:
        clock.advance(step)
        await fire_due(runtime.sessionmaker, runtime.execution, clock)


async def test_schedule_dst_spring_forward(client: httpx.AsyncClient, runtime: Runtime) -> None:
    """Shared case schedule-dst-spring-forward (America/Toronto, 2023-03-12)."""
    clock = FakeClock(utc(2023, 3, 12, 4, 59))
    await publish_at(client, runtime, clock, cron="0 */2 * * *", timezone="America/Toronto")
    await drive(runtime, clock, utc(2023, 3, 12, 12), 60)
    assert await fired(runtime) == [
        utc(2023, 3, 12, 5),
        utc(2023, 3, 12, 7),  # local 02:00 does not exist: fired once at 03:00 EDT
        utc(2023, 3, 12, 8),
        utc(2023, 3, 12, 10),
        utc(2023, 3, 12, 12),
    ]
    async with runtime.engine.connect() as conn:
        keys = (await conn.execute(text("select idempotency_key from runs"))).scalars().all()
        lags = (await conn.execute(text("select lag_ms from schedule_fires"))).scalars().all()
    assert len(keys) == len(set(keys)) == 5
    assert all(lag is not None and 0 <= lag <= 60_000 for lag in lags)
    await drive(runtime, clock, utc(2023, 3, 12, 16), 60)  # continues afterwards
    assert len(await fired(runtime)) == 7


async def test_schedule_dst_fall_back(client: httpx.AsyncClient, runtime: Runtime) -> None:
    """Shared case schedule-dst-fall-back (Europe/London, 2025-10-26: 01:00-02:00 local
    happens twice, as BST from 00:00Z and as GMT from 01:00Z). Frequent jobs keep real
    spacing through the repeated hour; the fixed-time job fires once that night."""
    clock = FakeClock(utc(2025, 10, 26, 0, 0))
    london = {"timezone": "Europe/London"}
    await publish(client, scheduled(cron="*/15 * * * * *", **london))
    await publish(client, scheduled(mode="interval", interval_seconds=15, **london))
    await publish(client, scheduled(cron="*/5 * * * *", **london))
    await publish(client, scheduled(cron="30 1 * * *", **london))
    await resync(runtime, clock)
    await drive(runtime, clock, utc(2025, 10, 26, 2, 2), 15)
    by_kind: dict[str, list[datetime]] = {}
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select coalesce(s.definition->>'cron', 'interval') as kind, f.fire_at"
                " from schedule_fires f join schedules s on s.id = f.schedule_id"
                " order by f.fire_at"
            )
        )
        for kind, fire_at in rows:
            by_kind.setdefault(kind, []).append(fire_at)
        runs = (await conn.execute(text("select count(*) from runs"))).scalar_one()
    window = (utc(2025, 10, 26, 0, 58), utc(2025, 10, 26, 2, 2))

    def in_window(kind: str) -> list[datetime]:
        return [t for t in by_kind[kind] if window[0] <= t <= window[1]]

    for kind in ("*/15 * * * * *", "interval"):
        got = in_window(kind)
        assert len(got) == 64 * 4 + 1, kind  # none missing, none doubled
        assert {b - a for a, b in itertools.pairwise(got)} == {timedelta(seconds=15)}
    assert in_window("*/5 * * * *") == [
        utc(2025, 10, 26, 1) + timedelta(minutes=5 * i) for i in range(13)
    ]
    assert by_kind["30 1 * * *"] == [utc(2025, 10, 26, 0, 30)]  # 01:30 BST only
    assert runs == sum(len(v) for v in by_kind.values())  # one run per fire


@pytest.mark.parametrize(
    ("zone", "start", "end", "expected"),
    [
        # fall back: 02:30 local happens twice; fires once (first occurrence, 00:30Z)
        ("Europe/Berlin", utc(2023, 10, 28, 23), utc(2023, 10, 29, 2), [utc(2023, 10, 29, 0, 30)]),
        # spring forward: 02:30 local does not exist; fires at 03:00 AEDT (16:00Z)
        ("Australia/Sydney", utc(2023, 9, 30, 14), utc(2023, 9, 30, 17), [utc(2023, 9, 30, 16)]),
        ("Asia/Kolkata", utc(2023, 3, 25, 20), utc(2023, 3, 25, 22), [utc(2023, 3, 25, 21)]),
    ],
)
async def test_daily_schedule_through_dst_in_zones(
    client: httpx.AsyncClient,
    runtime: Runtime,
    zone: str,
    start: datetime,
    end: datetime,
    expected: list[datetime],
) -> None:
    clock = FakeClock(start)
    await publish_at(client, runtime, clock, cron="30 2 * * *", timezone=zone)
    await drive(runtime, clock, end, 30)
    assert await fired(runtime) == expected


async def test_two_schedulers_200_instants_no_duplicates_no_misses(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings
) -> None:
    clock = FakeClock(utc(2024, 5, 1, 12))
    await publish_at(client, runtime, clock, cron="* * * * * *")  # every second
    other = await build_runtime(settings, pool_size=3)
    try:
        other.execution.clock = clock
        for i in range(200):
            clock.advance(1)
            # the two schedulers race on every instant, in alternating order
            first, second = (runtime, other) if i % 2 else (other, runtime)
            await asyncio.gather(
                fire_due(first.sessionmaker, first.execution, clock),
                fire_due(second.sessionmaker, second.execution, clock),
            )
    finally:
        await other.close()
    got = await fired(runtime)
    assert got == [utc(2024, 5, 1, 12) + timedelta(seconds=s) for s in range(1, 201)]
    async with runtime.engine.connect() as conn:
        runs = (await conn.execute(text("select count(*) from runs"))).scalar_one()
        pending = (
            await conn.execute(text("select count(*) from schedule_fires where run_id is null"))
        ).scalar_one()
    assert runs == 200 and pending == 0


@pytest.mark.parametrize(("policy", "runs"), [("skip", 1), ("once", 2), ("all", 5)])
async def test_restart_catch_up_policy(
    client: httpx.AsyncClient, runtime: Runtime, policy: str, runs: int
) -> None:
    clock = FakeClock(utc(2024, 1, 1, 9, 59, 30))
    await publish_at(client, runtime, clock, cron="* * * * *", catch_up=policy, catch_up_window=300)
    clock.advance(10 * 60 + 15)  # down for ten minutes; now 10:09:45
    # all: 10:05..10:08 are missed but within the 300 s window, 10:09 is on time
    await fire_due(runtime.sessionmaker, runtime.execution, clock)
    got = await fired(runtime)
    assert len(got) == runs
    assert got[-1] == utc(2024, 1, 1, 10, 9)  # the on-time instant always fires
    clock.advance(30)
    await fire_due(runtime.sessionmaker, runtime.execution, clock)
    assert (await fired(runtime))[-1] == utc(2024, 1, 1, 10, 10)


async def test_changed_schedule_takes_effect_and_old_never_fires(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    clock = FakeClock(utc(2024, 1, 1, 10, 0, 30))
    wf = await publish_at(client, runtime, clock, cron="0 * * * *")  # hourly at :00
    r = await client.put(
        f"/api/workflows/{wf['id']}/draft", json={"diagram": scheduled(cron="30 * * * *")}
    )
    assert r.json()["ok"]
    assert (await client.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    await resync(runtime, clock)
    await drive(runtime, clock, utc(2024, 1, 1, 12, 5), 60)
    assert await fired(runtime) == [utc(2024, 1, 1, 10, 30), utc(2024, 1, 1, 11, 30)]
    # switching the trigger to a webhook disables the schedule
    d = diagram([node("hook", "trigger.webhook")], [])
    await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    assert (await client.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    await drive(runtime, clock, utc(2024, 1, 1, 14), 60)
    assert len(await fired(runtime)) == 2


async def test_publishing_an_invalid_schedule_is_rejected_with_the_field(
    client: httpx.AsyncClient,
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "bad cron"})).json()
    await client.put(
        f"/api/workflows/{wf['id']}/draft",
        json={"diagram": scheduled(cron="0 25 * * *", timezone="UTC")},
    )
    r = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert r.status_code == 422
    (diag,) = r.json()["diagnostics"]
    assert diag["node_id"] == "tick" and diag["field"] == "cron"


async def test_schedule_preview_fragment_lists_ten_times_in_zone_and_utc(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(
        "/designer/schedule-preview",
        json={"config": {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"}},
    )
    assert r.status_code == 200
    assert r.text.count("<tr>") == 11  # header + 10
    assert "Europe/Berlin" in r.text and " UTC" in r.text
    bad = await client.post("/designer/schedule-preview", json={"config": {"cron": "nope"}})
    assert "cron expression" in bad.text
