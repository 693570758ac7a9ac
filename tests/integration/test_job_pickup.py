"""The lean job pickup: one atomic script call takes due jobs (backend/workers/pickup.py).

Workers here run a recording job function on real Redis, with jobs enqueued by arq's own
``ArqRedis.enqueue_job`` (so arq's job format is what is read), except the last test,
which runs the engine on PostgreSQL to show a job lost after its take is recovered.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from typing import Any

import httpx
import pytest
from arq.constants import default_queue_name, job_key_prefix
from arq.utils import timestamp_ms
from arq.worker import func

from backend.runtime import Runtime
from backend.services.runs.recovery import sweep
from backend.settings import Settings
from backend.transport.redis_client import RedisTarget, arq_redis_settings
from backend.workers.pickup import JobTaker
from backend.workers.wake import WakeableWorker
from backend.workers.worker import stop_worker
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, start_manual

pytestmark = pytest.mark.integration

BOUND = 20.0  # seconds any wait below may take on a loaded machine (generous)
HEALTH_KEY = default_queue_name + ":health-check"  # arq's worker health record


def _recording_worker(
    settings: Settings, ran: list[tuple[int, str]], *, interleave: bool = True, **options: Any
) -> WakeableWorker:
    """A worker whose only jobs are ``record(n)`` (appends ``(n, job id)`` to ``ran``;
    first gives way to other tasks when ``interleave``) and ``boom()`` (raises)."""

    async def record(ctx: dict[str, Any], n: int) -> None:
        if interleave:
            await asyncio.sleep(0)  # let the other worker's pickup interleave
        ran.append((n, ctx["job_id"]))

    async def boom(ctx: dict[str, Any]) -> None:
        raise RuntimeError("job failed on purpose")

    target = RedisTarget(settings.redis_url)
    return WakeableWorker(
        functions=[func(record, name="record", max_tries=1), func(boom, name="boom", max_tries=1)],
        redis_settings=arq_redis_settings(target),
        redis_target=target,
        handle_signals=False,
        keep_result=0,
        poll_delay=0.005,
        idle_poll=0.05,
        **options,
    )


async def _until(predicate: Any, what: str) -> None:
    for _ in range(int(BOUND / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what} within {BOUND} s")


async def _left_keys(runtime: Runtime) -> set[str]:
    """arq keys other than the worker health record (no in-progress, retry or job keys
    should outlive a job)."""
    return {k.decode() for k in await runtime.redis.keys("arq:*")} - {HEALTH_KEY}


async def test_two_workers_racing_run_each_job_exactly_once(
    settings: Settings, runtime: Runtime
) -> None:
    jobs = 200
    for n in range(jobs):
        await runtime.redis.enqueue_job("record", n)
    ran: list[tuple[int, str]] = []
    workers = [_recording_worker(settings, ran, max_jobs=5) for _ in range(2)]
    tasks = [asyncio.create_task(w.async_run()) for w in workers]
    try:
        await _until(lambda: len(ran) >= jobs, f"{jobs} jobs run")
        await asyncio.sleep(0.2)  # a job run twice would show up now
    finally:
        for w in workers:
            await stop_worker(w)
        await asyncio.gather(*tasks, return_exceptions=True)
    counts = Counter(n for n, _ in ran)
    assert sorted(counts) == list(range(jobs))
    assert set(counts.values()) == {1}
    assert len({job_id for _, job_id in ran}) == jobs
    assert sum(w.jobs_complete for w in workers) == jobs
    assert await _left_keys(runtime) == set()


async def test_backlog_drains_without_waiting_for_idle_poll(
    settings: Settings, runtime: Runtime
) -> None:
    # more jobs than one look at the queue reads (queue_read_limit, 100), enqueued with no
    # wake-up: a worker that slept idle_poll (60 s) between looks would not finish in BOUND
    jobs = 150
    for n in range(jobs):
        await runtime.redis.enqueue_job("record", n)
    ran: list[tuple[int, str]] = []
    w = _recording_worker(settings, ran, interleave=False, max_jobs=20)
    w.idle_poll_s = 60.0
    task = asyncio.create_task(w.async_run())
    try:
        await _until(lambda: len(ran) >= jobs, f"{jobs} queued jobs run")
    finally:
        await stop_worker(w)
        await asyncio.gather(task, return_exceptions=True)
    assert sorted(n for n, _ in ran) == list(range(jobs))


async def test_deferred_job_stays_queued_until_due(runtime: Runtime) -> None:
    later = await runtime.redis.enqueue_job("record", 1, _defer_by=timedelta(seconds=60))
    now = await runtime.redis.enqueue_job("record", 2)
    assert later is not None and now is not None
    taker = JobTaker(runtime.redis, default_queue_name)
    clock = timestamp_ms()
    taken, first_left = await taker.take(clock, 10)
    assert [j.job_id for j in taken] == [now.job_id]
    assert first_left is not None and first_left > clock + 50_000  # the deferred job
    assert taken[0].body  # the body came with the job and left Redis
    assert not await runtime.redis.exists(job_key_prefix + now.job_id)
    assert await runtime.redis.zscore(default_queue_name, later.job_id) is not None
    assert await runtime.redis.exists(job_key_prefix + later.job_id)
    assert await taker.take(clock, 10) == ([], first_left)
    (due,), left = await taker.take(clock + 61_000, 10)
    assert left is None  # the queue is empty
    assert due.job_id == later.job_id
    assert due.score == first_left
    assert await runtime.redis.zcard(default_queue_name) == 0


async def test_take_respects_its_limit_in_due_order(runtime: Runtime) -> None:
    ids = []
    for n in range(5):
        job = await runtime.redis.enqueue_job("record", n, _defer_by=timedelta(seconds=-n))
        assert job is not None
        ids.append(job.job_id)
    taker = JobTaker(runtime.redis, default_queue_name)
    first, first_left = await taker.take(timestamp_ms(), 2)
    assert [j.job_id for j in first] == [ids[4], ids[3]]  # the most overdue first
    assert first_left == await runtime.redis.zscore(default_queue_name, ids[2])
    assert await runtime.redis.zcard(default_queue_name) == 3


async def test_burst_worker_stops_after_max_burst_jobs(
    settings: Settings, runtime: Runtime
) -> None:
    for n in range(5):
        await runtime.redis.enqueue_job("record", n)
    ran: list[tuple[int, str]] = []
    w = _recording_worker(settings, ran, burst=True, max_burst_jobs=2)
    try:
        await asyncio.wait_for(w.async_run(), BOUND)
    finally:
        await stop_worker(w)
    assert len(ran) == 2
    assert await runtime.redis.zcard(default_queue_name) == 3


async def test_failed_expired_and_unknown_jobs_are_counted_and_the_worker_goes_on(
    settings: Settings, runtime: Runtime
) -> None:
    await runtime.redis.enqueue_job("boom")
    await runtime.redis.enqueue_job("no_such_function")
    expired = await runtime.redis.enqueue_job("record", 1)
    assert expired is not None
    await runtime.redis.delete(job_key_prefix + expired.job_id)
    await runtime.redis.enqueue_job("record", 2)
    ran: list[tuple[int, str]] = []
    w = _recording_worker(settings, ran, burst=True)
    try:
        await asyncio.wait_for(w.async_run(), BOUND)
    finally:
        await stop_worker(w)
    assert [n for n, _ in ran] == [2]
    assert (w.jobs_complete, w.jobs_failed) == (1, 3)
    assert await _left_keys(runtime) == set()


async def _one_call_run(client: httpx.AsyncClient, url: str) -> str:
    wf = await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("call", "http.request", method="POST", url=url)],
            [edge("start", "call")],
        ),
    )
    return await start_manual(client, wf, {})


async def test_job_taken_but_never_run_is_recovered_by_the_sweeper(
    client: httpx.AsyncClient, runtime: Runtime, worker_factory: Any, sink: HttpSink
) -> None:
    run_id = await _one_call_run(client, sink.url)
    # a worker takes the step's job, then dies (or loses Redis) before running it
    (lost,), _ = await JobTaker(runtime.redis, default_queue_name).take(timestamp_ms(), 10)
    assert lost.body
    assert await runtime.redis.zcard(default_queue_name) == 0
    async with worker_factory() as _w:
        counts = await sweep(runtime.execution.recovery, grace_seconds=0)
        assert sum(counts.values()) >= 1, counts
        assert await wait_for_run(runtime, run_id, timeout=BOUND) == "succeeded"
    assert len(sink.requests) == 1
