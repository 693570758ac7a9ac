"""The engine's hot path (docs/engine.md, "Performance"): one transaction per step
transition, the pool without pre-ping, running jobs off arq's queue."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import asyncpg
import httpx
import pytest
from arq.constants import default_queue_name
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, start_manual

pytestmark = pytest.mark.integration


def _chain(url: str, n: int) -> dict[str, Any]:
    nodes = [node("start", "trigger.manual")]
    edges = []
    previous = "start"
    for i in range(n):
        nodes.append(node(f"s{i}", "http.request", method="POST", url=url, body={"i": i}))
        edges.append(edge(previous, f"s{i}"))
        previous = f"s{i}"
    return diagram(nodes, edges)


async def test_chain_claims_next_step_in_the_completing_transaction(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    wf = await publish(client, _chain(sink.url, 4))
    run_id = await start_manual(client, wf, {"go": 1})
    assert await wait_for_run(runtime, run_id) == "succeeded"
    assert [r.json() for r in sink.requests] == [{"i": i} for i in range(4)]
    async with runtime.engine.connect() as conn:
        attempts = (
            await conn.execute(
                text("select step_id, status from attempts where run_id = :r order by id"),
                {"r": run_id},
            )
        ).all()
        events = (
            await conn.execute(
                text(
                    "select kind, step_id, xmin::text from events where run_id = :r"
                    " and kind in ('step.succeeded', 'step.started')"
                ),
                {"r": run_id},
            )
        ).all()
    tx = {(kind, step): xmin for kind, step, xmin in events}
    # s1..s3 were started by the transaction that completed the step before (same xmin):
    # no other worker could claim them in between and no commit was spent on a claim alone
    same_tx = [
        tx[("step.succeeded", f"s{i}")] == tx[("step.started", f"s{i + 1}")] for i in range(3)
    ]
    assert attempts == [(f"s{i}", "succeeded") for i in range(4)]
    assert same_tx == [True, True, True]


async def test_running_step_job_leaves_the_queue(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    release = threading.Event()

    def slow(_request: Any, _n: int) -> tuple[int, Any]:
        release.wait(timeout=10)
        return 200, {"ok": True}

    sink.handler = slow
    wf = await publish(client, _chain(sink.url, 1))
    run_id = await start_manual(client, wf, {})
    try:
        for _ in range(200):  # until the step runs (its HTTP call waits for the release)
            if sink.requests:
                break
            await asyncio.sleep(0.05)
        assert await _running(runtime, run_id)
        # running, yet not in the queue: pollers do not re-check it every few ms
        assert await runtime.redis.zcard(default_queue_name) == 0
    finally:
        release.set()
    assert await wait_for_run(runtime, run_id) == "succeeded"


async def _running(runtime: Runtime, run_id: str) -> bool:
    async with runtime.engine.connect() as conn:
        return bool(
            (
                await conn.execute(
                    text("select count(*) from attempts where run_id = :r and status = 'running'"),
                    {"r": run_id},
                )
            ).scalar_one()
        )


async def test_pool_replaces_connections_the_server_closed(runtime: Runtime) -> None:
    async with runtime.engine.connect() as conn:
        pid = (await conn.execute(text("select pg_backend_pid()"))).scalar_one()
    dsn = runtime.settings.database_url.replace("postgresql+asyncpg://", "postgresql://")
    admin = await asyncpg.connect(dsn)
    try:
        assert await admin.fetchval("select pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    await asyncio.sleep(0.2)  # the pooled connection sees its socket close
    # no pre-ping round trip, yet the next checkout does not hand out the dead connection
    async with runtime.engine.connect() as conn:
        again = (await conn.execute(text("select pg_backend_pid()"))).scalar_one()
    assert again != pid
