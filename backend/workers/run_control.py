"""A worker's run-control loops: cancel notices and run deadlines.

- :func:`listen_for_cancels` subscribes to
  :data:`~backend.services.runs.channels.CANCEL_CHANNEL` and stops this process's attempts of
  each run announced there (backend/services/runs/cancellation.py). When Redis is away it
  resubscribes every ``retry`` seconds; meanwhile leases are the backstop (an attempt of
  an ended run stops at its next heartbeat).
- :func:`eager_control` does the first for an API process while it may run steps itself
  (backend/services/runs/execution/eager.py), and drains those runs when the process stops.
- :func:`enforce_deadlines` sleeps until the earliest run deadline (looking again at least
  every ``poll`` seconds, for runs started meanwhile) and times out the overdue runs, which
  announces their cancellation. The sweeper's pass does the same, less promptly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from redis.asyncio import Redis

from backend.services.runs.cancellation import CancelWatch
from backend.services.runs.channels import CANCEL_CHANNEL
from backend.services.runs.deadlines import next_deadline, time_out_overdue
from backend.services.runs.execution import Execution
from backend.workers.wake import raise_if_cancelling

log = logging.getLogger(__name__)

IDLE_READ_SECONDS = 1.0
"""How long one read of the cancel subscription waits for a notice, in seconds."""


async def listen_for_cancels(redis: Redis, watch: CancelWatch, *, retry: float = 1.0) -> None:
    """Stop attempts of the runs announced on the cancel channel, until cancelled."""
    while True:
        pubsub = redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(CANCEL_CHANNEL)
            while True:
                # a short read timeout (under the client's socket timeout) keeps an idle
                # subscription open instead of failing and resubscribing every few seconds
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=IDLE_READ_SECONDS
                )
                if message is None or message.get("type") != "message":
                    continue
                data = message["data"]
                run_id = data.decode() if isinstance(data, bytes) else str(data)
                if watch.cancel(run_id):
                    log.info("stopped the running attempts of ended run %s", run_id)
        except Exception as exc:  # Redis away or restarted: resubscribe, never stop
            raise_if_cancelling()
            log.warning("cancel notices unavailable (%s); retrying in %g s", exc, retry)
        finally:
            try:
                await pubsub.aclose()
            except Exception:  # the connection is gone already
                pass
        await asyncio.sleep(retry)


async def enforce_deadlines(execution: Execution, *, poll: float = 1.0) -> None:
    """Time out runs at their deadline (within about ``poll`` seconds), until cancelled."""
    while True:
        delay = poll
        try:
            await time_out_overdue(execution.recovery)
            due = await next_deadline(execution.recovery)
            if due is not None:
                until = (due - execution.clock.now()).total_seconds()
                delay = min(poll, max(until, 0.0) + 0.005)  # strictly past the deadline
        except Exception:  # a failed look (database restarting) must not end the loop
            log.exception("run deadline check failed")
        await asyncio.sleep(delay)


@contextlib.asynccontextmanager
async def eager_control(
    redis: Redis, execution: Execution, *, grace_seconds: float
) -> AsyncIterator[None]:
    """Within the block, stop this process's eager attempts of runs announced on the cancel
    channel (:func:`listen_for_cancels`; nothing when its eager budget is 0). On leaving
    it (the API stops), drain the eager runs like a stopping worker: no new one, the
    running ones get ``grace_seconds`` to finish, then their attempts are handed back to
    workers (:meth:`~backend.services.runs.execution.eager.EagerRuns.stop`)."""
    listener = None
    if execution.eager.limit > 0:
        listener = asyncio.create_task(listen_for_cancels(redis, execution.cancel_watch))
    try:
        yield
    finally:
        await execution.eager.stop(grace_seconds)
        if listener is not None:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
