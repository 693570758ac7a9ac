"""Jobs dispatched at the same moment share one Redis round trip (backend/transport/dispatch.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from arq.constants import default_queue_name, job_key_prefix
from arq.jobs import deserialize_job
from redis.exceptions import ConnectionError as RedisConnectionError

from backend.runtime import Runtime
from backend.services.runs.channels import run_channel
from backend.transport.dispatch import MAX_BATCH, ArqDispatcher

pytestmark = pytest.mark.integration


async def _queued(runtime: Runtime) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Job id -> (function, args) of every job in arq's queue."""
    found = {}
    for raw in await runtime.redis.zrange(default_queue_name, 0, -1):
        job_id = raw.decode()
        body = await runtime.redis.get(job_key_prefix + job_id)
        assert body is not None, f"job {job_id} queued without its body"
        job = deserialize_job(body)
        found[job_id] = (job.function, tuple(job.args))
    return found


async def test_concurrent_dispatches_share_round_trips(runtime: Runtime) -> None:
    await runtime.redis.flushall()
    dispatcher = ArqDispatcher(runtime.redis)
    runs = [f"run-{i}" for i in range(MAX_BATCH + 44)]
    await asyncio.gather(*(dispatcher.dispatch_step(run, "s1") for run in runs))
    # all are waiting before the sender's first round trip: MAX_BATCH, then the rest
    assert dispatcher.batches == 2
    queued = await _queued(runtime)
    assert sorted(queued.values()) == sorted(("execute_step", (run, "s1")) for run in runs)

    await dispatcher.dispatch_advance("alone")  # no round trip under way: sent at once
    assert dispatcher.batches == 3


async def test_a_deferred_job_keeps_its_due_time_in_a_batch(runtime: Runtime) -> None:
    await runtime.redis.flushall()
    dispatcher = ArqDispatcher(runtime.redis)
    await asyncio.gather(
        dispatcher.dispatch_step("now", "s1"),
        dispatcher.dispatch_step("later", "s1", delay=60),
        dispatcher.dispatch_step("soon", "s1"),
    )
    scores = {
        (await _queued(runtime))[job_id.decode()][1][0]: score
        for job_id, score in await runtime.redis.zrange(default_queue_name, 0, -1, withscores=True)
    }
    assert 59_000 <= scores["later"] - scores["soon"] <= 61_000
    assert abs(scores["now"] - scores["soon"]) < 1_000


async def test_a_failed_round_trip_is_logged_by_each_caller_and_raises_nothing(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    dispatcher = ArqDispatcher(runtime.redis)

    async def unreachable(jobs: object) -> None:
        raise RedisConnectionError("Redis is gone")

    monkeypatch.setattr(dispatcher, "_send", unreachable)
    with caplog.at_level(logging.DEBUG, logger="backend.transport.dispatch"):
        await asyncio.gather(*(dispatcher.dispatch_step(f"r{i}", "s1") for i in range(5)))
    failed = [r for r in caplog.records if "could not enqueue" in r.getMessage()]
    assert len(failed) == 5
    assert [r.levelno for r in failed].count(logging.WARNING) == 1  # once per outage
    monkeypatch.undo()
    with caplog.at_level(logging.WARNING, logger="backend.transport.dispatch"):
        await dispatcher.dispatch_step("back", "s1")
    assert any("works again" in r.getMessage() for r in caplog.records)


async def test_notices_travel_with_jobs_in_order(runtime: Runtime) -> None:
    await runtime.redis.flushall()
    dispatcher = ArqDispatcher(runtime.redis)
    listener = runtime.redis.pubsub()
    await listener.subscribe(run_channel("r1"))
    await listener.get_message(timeout=1)  # the subscription's confirmation
    await asyncio.gather(
        dispatcher.notify("r1", b"first"),
        dispatcher.dispatch_step("r1", "s2"),
        dispatcher.notify("r1", b"second"),
        dispatcher.notify("r1", b"third"),
    )
    assert dispatcher.batches == 1
    heard = []
    for _ in range(3):
        message = await listener.get_message(ignore_subscribe_messages=True, timeout=2)
        assert message is not None
        heard.append(message["data"])
    assert heard == [b"first", b"second", b"third"]
    assert list((await _queued(runtime)).values()) == [("execute_step", ("r1", "s2"))]
    await listener.aclose()
