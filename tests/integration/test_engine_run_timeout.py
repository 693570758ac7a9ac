"""Shared case engine-run-timeout-cancels-in-flight: a run timeout, or a user's Cancel,
stops the connector call that is still running at once (the remote end sees the
connection closed), and the steps that will never run are shown cancelled.

The worker runs with a 60 s lease, so its heartbeat (every 20 s) cannot be what stops the
call: only the cancel notice can.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
import pytest_asyncio
from sqlalchemy import text

from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import running_worker, wait_for_run
from tests.integration.flows import publish, run_detail, set_settings, start_manual, steps_by_id
from tests.slow_endpoint import SlowEndpoint

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture
async def slow() -> AsyncIterator[SlowEndpoint]:
    endpoint = await SlowEndpoint().start()
    yield endpoint
    await endpoint.stop()


def three_calls_join_call(url: str) -> dict[str, Any]:
    """manual -> calls taking 10 s, 2 s and 1 s in parallel -> Join (all) -> a 7 s call."""
    nodes = [node("start", "trigger.manual")]
    edges = []
    for name, seconds in (("slow", 10), ("medium", 2), ("quick", 1)):
        nodes.append(node(name, "http.request", method="GET", url=f"{url}/sleep/{seconds}"))
        edges += [edge("start", name), edge(name, "join")]
    nodes += [
        node("join", "control.join", mode="all"),
        node("last", "http.request", method="GET", url=f"{url}/sleep/7"),
    ]
    edges.append(edge("join", "last"))
    return diagram(nodes, edges)


async def attempts_of(runtime: Runtime, run_id: str) -> dict[str, str]:
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text("select step_id, status from attempts where run_id = :id"), {"id": run_id}
        )
        return {step_id: status for step_id, status in rows}


async def wait_for(predicate: Any, seconds: float) -> None:
    """Poll ``await predicate()`` every 50 ms until true; fail after ``seconds``."""
    for _ in range(int(seconds / 0.05)):
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def check_stopped(
    client: httpx.AsyncClient, runtime: Runtime, slow: SlowEndpoint, run_id: str, status: str
) -> None:
    """The 10 s call was aborted, the others answered, and nothing ran after the end."""
    slow_call = slow.call("/sleep/10")
    assert slow_call is not None
    # the remote end saw the connection closed before its answer was due
    await asyncio.wait_for(slow_call.done.wait(), 8)
    assert slow_call.outcome == "aborted"
    detail = await run_detail(client, run_id)
    assert detail["status"] == status
    steps = steps_by_id(detail)
    assert steps["slow"]["status"] == "cancelled"
    assert steps["join"]["status"] == "cancelled"  # never runs: not "pending"
    assert steps["last"]["status"] == "cancelled"
    assert slow.call("/sleep/7") is None  # the last step never started
    assert (await attempts_of(runtime, run_id))["slow"] == "cancelled"
    page = await client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    assert 'data-step-id="join" data-status="cancelled"' in page.text
    assert 'data-step-id="last" data-status="cancelled"' in page.text


async def test_engine_run_timeout_cancels_in_flight(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, slow: SlowEndpoint
) -> None:
    wf = await publish(client, three_calls_join_call(slow.url))
    await set_settings(client, wf, run_timeout_seconds=4)
    long_lease = msgspec.structs.replace(settings, lease_seconds=60.0)
    # the worker times the run out itself (its deadline loop), no manual sweep
    async with running_worker(long_lease, sweep=True):
        run_id = await start_manual(client, wf, {})
        assert await wait_for_run(runtime, run_id, timeout=9) == "timed_out"
        await check_stopped(client, runtime, slow, run_id, "timed_out")
        medium, quick = slow.call("/sleep/2"), slow.call("/sleep/1")
        assert medium is not None and medium.outcome == "answered"
        assert quick is not None and quick.outcome == "answered"
    detail = await run_detail(client, run_id)
    assert steps_by_id(detail)["medium"]["status"] == "succeeded"


async def cancel_during_the_slow_call(
    client: httpx.AsyncClient, slow: SlowEndpoint, wf: dict[str, Any]
) -> str:
    """Start a run, wait until the 2 s call answered (the 10 s one is in flight), cancel."""
    run_id = await start_manual(client, wf, {})

    async def medium_answered() -> bool:
        call = slow.call("/sleep/2")
        return call is not None and call.outcome == "answered"

    await wait_for(medium_answered, 8)
    r = await client.post(f"/api/runs/{run_id}/cancel")
    assert r.json() == {"cancelled": True}
    return run_id


async def test_engine_run_cancel_stops_the_call_in_flight(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, slow: SlowEndpoint
) -> None:
    """Same for a user's Cancel in the middle of the 10 s call; the API process that
    cancels is not the worker, so the notice crosses Redis."""
    wf = await publish(client, three_calls_join_call(slow.url))
    long_lease = msgspec.structs.replace(settings, lease_seconds=60.0)
    async with running_worker(long_lease):
        run_id = await cancel_during_the_slow_call(client, slow, wf)
        await check_stopped(client, runtime, slow, run_id, "cancelled")


async def test_a_lost_cancel_notice_is_backed_up_by_the_heartbeat(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    slow: SlowEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redis loses the notice: the worker's next heartbeat (a third of a 3 s lease) finds
    the attempt no longer current and stops the call all the same."""

    async def lost(run_id: str) -> None:
        pass

    monkeypatch.setattr(runtime.execution.dispatcher, "announce_cancel", lost)
    wf = await publish(client, three_calls_join_call(slow.url))
    async with running_worker(msgspec.structs.replace(settings, lease_seconds=3.0)):
        run_id = await cancel_during_the_slow_call(client, slow, wf)
        await check_stopped(client, runtime, slow, run_id, "cancelled")
