"""Recovery: Redis may lose jobs, workers may die; PostgreSQL holds the truth."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text, update

from backend.db.models import Attempt
from backend.runtime import Runtime
from backend.services.runs.recovery import sweep
from backend.workers.scheduler import run_scheduler
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


def http_flow(url: str) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "http.request", method="POST", url=url, body="=body"),
        ],
        [edge("hook", "call")],
    )


async def test_flushed_redis_loses_nothing(
    client: httpx.AsyncClient, runtime: Runtime, sink: HttpSink, worker_factory: Any
) -> None:
    wf = await publish(client, http_flow(sink.url))
    run_id = (await client.post(wf["webhook_path"], json={"n": 1})).json()["run_id"]
    await runtime.redis.flushall()  # the job is gone before any worker saw it
    await asyncio.sleep(0.05)
    counts = await sweep(runtime.execution.recovery, grace_seconds=0)
    assert counts["redispatched"] == 1
    async with worker_factory():
        assert await wait_for_run(runtime, run_id) == "succeeded"
    assert len(sink.requests) == 1


async def test_expired_lease_of_a_dead_worker_is_retried_once(
    client: httpx.AsyncClient, runtime: Runtime, sink: HttpSink, worker_factory: Any
) -> None:
    wf = await publish(client, http_flow(sink.url))
    run_id = (await client.post(wf["webhook_path"], json={"n": 1})).json()["run_id"]
    await runtime.redis.flushall()
    # A worker claims the attempt and dies before completing: simulate the claim.
    from sqlalchemy import select

    from backend.db.run_store import load_state, lock_run, save_state
    from backend.services.runs.execution.steps import claim_attempt

    now = runtime.execution.clock.now()
    async with runtime.sessionmaker() as session, session.begin():
        run = await lock_run(session, run_id)
        assert run is not None
        state = await load_state(session, run)
        attempt = claim_attempt(
            state,
            "call",
            run_id=run.id,
            worker="dead:1",
            input={},
            config={},
            now=now,
            lease_until=now + timedelta(seconds=30),
        )
        await save_state(session, run, state, start=attempt)
        dead_token = attempt.fencing_token
        dead_id = attempt.id
    async with runtime.sessionmaker() as session, session.begin():
        await session.execute(
            update(Attempt)
            .where(Attempt.id == dead_id)
            .values(lease_expires_at=now - timedelta(seconds=1))
        )
    counts = await sweep(runtime.execution.recovery, grace_seconds=0)
    assert counts["expired"] == 1
    async with worker_factory():
        assert await wait_for_run(runtime, run_id) == "succeeded"
    # The dead worker's late completion is discarded by the fencing token.
    from backend.db.run_store import finish_attempt

    async with runtime.sessionmaker() as session, session.begin():
        late = await finish_attempt(
            session,
            dead_id,
            dead_token,
            status="succeeded",
            output={"late": True},
            error=None,
            now=now,
        )
    assert late is False
    async with runtime.sessionmaker() as session:
        rows = (
            await session.execute(select(Attempt.number, Attempt.status).order_by(Attempt.number))
        ).all()
    assert [tuple(r) for r in rows] == [(1, "expired"), (2, "succeeded")]
    assert len(sink.requests) == 1


async def test_only_one_scheduler_leads(runtime: Runtime, settings: Any) -> None:
    from backend.runtime import build_runtime

    other = await build_runtime(settings, pool_size=2)
    stop = asyncio.Event()
    try:
        first = asyncio.create_task(run_scheduler(runtime, stop))
        await asyncio.sleep(0.3)
        second = asyncio.create_task(run_scheduler(other, stop))
        await asyncio.sleep(0.3)
        async with runtime.engine.connect() as conn:
            holders = (
                await conn.execute(
                    text("select count(*) from pg_locks where locktype = 'advisory' and granted")
                )
            ).scalar_one()
        assert holders == 1
        stop.set()
        await asyncio.wait_for(asyncio.gather(first, second), 10)
    finally:
        await other.close()
