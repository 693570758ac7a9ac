"""Idle workers sleep on the wake-up channel, not on a poll timer (backend/workers/wake.py).

Every worker here is built with ``idle_poll=30``: without the wake-up (or without the
deferred-job due time) it would not look at the queue again for 30 s, so the bounded
waits below (5 s) fail when the mechanism breaks.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from arq.constants import default_queue_name

from backend.observability import gc_pauses
from backend.runtime import Runtime
from backend.services.runs.channels import WAKE_CHANNEL
from backend.settings import Settings
from backend.transport.dispatch import ArqDispatcher
from backend.workers.worker import make_worker, stop_worker
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, start_manual

pytestmark = pytest.mark.integration

LONG_IDLE_POLL = 30.0  # seconds: far beyond every bound below
BOUND = 5.0  # seconds a woken worker may take to finish a one-step run (generous)


def _one_call(url: str) -> dict[str, Any]:
    return diagram(
        [node("start", "trigger.manual"), node("call", "http.request", method="POST", url=url)],
        [edge("start", "call")],
    )


async def _subscribers(runtime: Runtime) -> int:
    ((_channel, count),) = await runtime.redis.pubsub_numsub(WAKE_CHANNEL)
    return int(count)


async def _until_idle(runtime: Runtime, subscribers: int = 1) -> None:
    """Wait until ``subscribers`` workers listen on the wake-up channel, then a little
    longer, so they have looked at the queue and sleep in the (30 s) wait."""
    for _ in range(400):
        if await _subscribers(runtime) == subscribers:
            await asyncio.sleep(0.3)
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no worker subscribed to {WAKE_CHANNEL} within 20 s")


async def _queued_run(client: httpx.AsyncClient, runtime: Runtime, url: str) -> str:
    """A started run whose step ``call`` is ready in PostgreSQL but has no job in Redis."""
    wf = await publish(client, _one_call(url))
    run_id = await start_manual(client, wf, {})
    await runtime.redis.flushall()  # its job is gone: only an explicit dispatch runs it
    return run_id


@pytest_asyncio.fixture
async def queued_run(client: httpx.AsyncClient, runtime: Runtime, sink: HttpSink) -> str:
    """Id of a run (see :func:`_queued_run`) whose step calls ``sink``."""
    return await _queued_run(client, runtime, sink.url)


@pytest_asyncio.fixture
async def idle_worker(queued_run: str, worker_factory: Any, runtime: Runtime) -> AsyncIterator[Any]:
    """A worker with a 30 s idle poll, started after ``queued_run`` and asleep on the
    wake-up channel."""
    async with worker_factory(idle_poll=LONG_IDLE_POLL) as w:
        await _until_idle(runtime)
        yield w


async def test_idle_worker_is_woken_by_a_dispatch(
    runtime: Runtime, queued_run: str, idle_worker: Any, sink: HttpSink
) -> None:
    await runtime.execution.dispatcher.dispatch_step(queued_run, "call")  # enqueue + wake-up
    assert await wait_for_run(runtime, queued_run, timeout=BOUND) == "succeeded"
    assert len(sink.requests) == 1


async def test_deferred_job_runs_when_due_without_a_wake_up_then(
    runtime: Runtime, queued_run: str, idle_worker: Any, sink: HttpSink
) -> None:
    # the only wake-up is published now, at enqueue time, 0.5 s before the job is due
    await ArqDispatcher(runtime.redis).dispatch_step(queued_run, "call", delay=0.5)
    await asyncio.sleep(0.2)
    assert sink.requests == []  # not before its due time
    assert await wait_for_run(runtime, queued_run, timeout=BOUND) == "succeeded"
    assert len(sink.requests) == 1


async def test_worker_recovers_from_a_killed_subscription(
    client: httpx.AsyncClient,
    runtime: Runtime,
    queued_run: str,
    idle_worker: Any,
    sink: HttpSink,
) -> None:
    killed = await runtime.redis.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
    # the worker's subscriptions: wake-ups and cancel notices (backend/workers/run_control.py)
    assert int(killed) == 2
    await runtime.execution.dispatcher.dispatch_step(queued_run, "call")
    assert await wait_for_run(runtime, queued_run, timeout=BOUND) == "succeeded"
    # it subscribed again (no lasting fallback to polling) and that subscription wakes it;
    # this run's step is dispatched by the start path (ArqDispatcher: enqueue + wake-up)
    await _until_idle(runtime)
    second = await start_manual(client, await publish(client, _one_call(sink.url)), {})
    assert await wait_for_run(runtime, second, timeout=BOUND) == "succeeded"
    assert len(sink.requests) == 2


async def test_burst_worker_exits_on_an_empty_queue(settings: Settings, runtime: Runtime) -> None:
    w = make_worker(settings, burst=True, idle_poll=LONG_IDLE_POLL)
    try:
        await asyncio.wait_for(w.async_run(), BOUND)
    finally:
        await stop_worker(w)
    assert w.jobs_complete == 0


async def test_burst_worker_runs_the_queue_then_exits(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime, sink: HttpSink
) -> None:
    run_id = await _queued_run(client, runtime, sink.url)
    await runtime.execution.dispatcher.dispatch_step(run_id, "call")
    assert await runtime.redis.zcard(default_queue_name) == 1
    w = make_worker(settings, burst=True, idle_poll=LONG_IDLE_POLL)
    try:
        await asyncio.wait_for(w.async_run(), BOUND)
    finally:
        await stop_worker(w)
    assert await wait_for_run(runtime, run_id, timeout=1) == "succeeded"
    assert await runtime.redis.zcard(default_queue_name) == 0


async def test_worker_pool_keeps_one_connection_per_job_slot(
    settings: Settings, runtime: Runtime
) -> None:
    """A worker running all its slots needs no overflow connections (each new one costs
    PostgreSQL a backend and asyncpg its statement preparations)."""
    w = make_worker(settings, burst=True, idle_poll=LONG_IDLE_POLL, max_jobs=7)
    try:
        await asyncio.wait_for(w.async_run(), BOUND)
        assert w.ctx["runtime"].engine.pool.size() == 7
    finally:
        await stop_worker(w)


_TUNED_WORKER = """
import asyncio, gc, json, sys
from backend.observability import gc_pauses
from backend.settings import load_settings
from backend.workers.worker import make_worker, stop_worker

async def main(tune):
    settings = load_settings(environ={}, database_url=sys.argv[1], redis_url=sys.argv[2])
    w = make_worker(settings, burst=True, idle_poll=0.5, tune_gc=tune)
    try:
        await asyncio.wait_for(w.async_run(), 30)
    finally:
        await stop_worker(w)

asyncio.run(main(sys.argv[3] == "tuned"))
print(json.dumps({"configured": gc_pauses.configured(), "threshold": gc.get_threshold()}))
"""


@pytest.mark.parametrize("tuned", [True, False])
async def test_worker_tunes_its_garbage_collector_when_asked(
    settings: Settings, runtime: Runtime, tuned: bool
) -> None:
    """``railyard worker`` freezes its startup objects like the API; a worker made
    without ``tune_gc`` (tests, embedded uses) leaves the collector alone. A fresh
    interpreter each: the settings are process-wide."""
    argv = [settings.database_url, settings.redis_url, "tuned" if tuned else "plain"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _TUNED_WORKER, *argv, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), BOUND * 4)
    assert proc.returncode == 0
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["configured"] is tuned
    expected = list(gc_pauses.GC_THRESHOLDS) if tuned else [700, 10, 10]
    assert result["threshold"] == expected


async def test_stopping_worker_whose_wait_swallowed_the_cancel_still_stops(
    settings: Settings, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py can turn a cancelled read into a connection error that a Redis-outage
    handler then treats as an outage: the poll loop must still end at its next turn, and
    a stopping worker takes no job meanwhile (a draining worker puts every job it takes
    back on the queue: taking them again would spin)."""
    w = make_worker(settings, idle_poll=LONG_IDLE_POLL)
    waiting, swallowed = asyncio.Event(), asyncio.Event()

    async def wait_swallowing_cancel() -> None:
        waiting.set()
        try:
            await asyncio.sleep(LONG_IDLE_POLL)
        except asyncio.CancelledError:
            swallowed.set()  # handled like an outage: the loop goes on

    monkeypatch.setattr(w, "_wait_for_work", wait_swallowing_cancel)
    w.main_task = asyncio.create_task(w.main())
    await asyncio.wait_for(waiting.wait(), BOUND * 4)
    await stop_worker(w)
    assert swallowed.is_set()
    assert w.main_task.done() and w.main_task.cancelled()
    assert w.allow_pick_jobs is False
