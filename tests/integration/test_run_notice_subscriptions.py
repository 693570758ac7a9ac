"""The shared run-notice subscription on a real Redis: a wait's end leaves its channel in
the background (the waiting request's answer does not wait for the UNSUBSCRIBE round
trip), and a channel watched again meanwhile stays subscribed."""

from __future__ import annotations

import asyncio
import uuid

from backend.runtime import Runtime
from backend.services.runs.channels import run_channel
from backend.services.runs.run_watch import notices_for


async def _subscribers(runtime: Runtime, run_id: str) -> int:
    ((_channel, count),) = await runtime.redis.pubsub_numsub(run_channel(run_id))
    return int(count)


async def _settled(runtime: Runtime, run_id: str, expected: int) -> int:
    """The channel's subscriber count once it is ``expected`` (or after 5 s)."""
    for _ in range(100):
        count = await _subscribers(runtime, run_id)
        if count == expected:
            return count
        await asyncio.sleep(0.05)
    return count


async def test_a_finished_wait_unsubscribes_in_the_background(runtime: Runtime) -> None:
    notices = notices_for(runtime.redis)
    run_id = str(uuid.uuid4())
    async with notices.watch(run_id):
        assert await _subscribers(runtime, run_id) == 1
    # the block is left at once; the UNSUBSCRIBE follows
    assert await _settled(runtime, run_id, 0) == 0


async def test_a_channel_watched_again_while_leaving_stays_subscribed(runtime: Runtime) -> None:
    notices = notices_for(runtime.redis)
    run_id = str(uuid.uuid4())
    async with notices.watch(run_id):
        pass
    # watched again before the background UNSUBSCRIBE ran: it must not drop the new wait
    async with notices.watch(run_id) as wait:
        await asyncio.sleep(0.2)
        assert await _subscribers(runtime, run_id) == 1
        await runtime.redis.publish(run_channel(run_id), b"")
        await asyncio.wait_for(wait.event.wait(), 5)
    assert await _settled(runtime, run_id, 0) == 0
