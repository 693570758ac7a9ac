"""Wake idle arq workers when work is enqueued, instead of polling Redis every few ms.

arq finds jobs by polling its queue (a sorted set scored by the due time in ms) every
``poll_delay`` seconds. A short delay keeps dispatch latency low but costs an idle worker
a steady share of a core (about 8 % at 5 ms on a 2-core machine; bench/engine.py), and a
long one adds up to ``poll_delay`` to every queued step. Here the dispatcher publishes an
empty message on :data:`WAKE_CHANNEL` after each enqueue, and an idle
:class:`WakeableWorker` sleeps on a pub/sub subscription until that message arrives, the
next deferred job (retry backoff, durable timer) falls due, or ``idle_poll`` seconds pass.

Nothing depends on the wake-up arriving: a lost message (Redis restarted, the
subscription broken) costs at most ``idle_poll`` seconds, and PostgreSQL stays the truth
(the sweeper re-dispatches ready steps whose job was lost).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from arq.utils import timestamp_ms
from arq.worker import Worker
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from backend.services.channels import WAKE_CHANNEL
from backend.transport.redis_client import RedisTarget, redis_client
from backend.workers.health import Backoff, ServiceHealth

log = logging.getLogger(__name__)

DEFAULT_IDLE_POLL_SECONDS = 1.0
"""Longest sleep of an idle worker between two looks at the queue, in seconds."""


UNSUBSCRIBED_POLL_SECONDS = 0.1
"""Poll interval, in seconds, while the wake-up subscription cannot be (re)established."""


class WakeableWorker(Worker):
    """arq :class:`~arq.worker.Worker` that sleeps until woken while it has free slots.

    Between two polls of the queue the worker waits for the first of: a message on
    :data:`WAKE_CHANNEL`; the due time of the earliest deferred job; ``idle_poll``
    seconds (seconds, default :data:`DEFAULT_IDLE_POLL_SECONDS`). While all ``max_jobs``
    slots are busy it polls every ``poll_delay`` seconds like arq does, so a freed slot
    picks up waiting work promptly.

    ``main`` mirrors arq 0.28's ``Worker.main`` (pool, startup hook, poll loop, burst
    exit) with the fixed-interval sleep replaced by :meth:`_wait_for_work`, and survives
    Redis outages instead of exiting (arq's loop lets the first connection error out).
    The Redis client is made without connecting (:func:`redis_client`), so a worker
    starts while Redis is down and connects when it comes up. ``health`` records what the
    worker last saw of Redis (and, from the jobs, of PostgreSQL).
    """

    def __init__(
        self,
        *args: Any,
        redis_target: str | RedisTarget,
        idle_poll: float = DEFAULT_IDLE_POLL_SECONDS,
        health: ServiceHealth | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self.redis_target = redis_target
        self.idle_poll_s = idle_poll
        self.health = health or ServiceHealth("worker")
        self._wake: PubSub | None = None

    async def main(self) -> None:
        """Poll loop that rides out Redis outages of any length.

        A Redis connection error anywhere in one iteration marks Redis down in
        :attr:`health` (one log line), frees the job slots the failed iteration may have
        taken, and retries after a :class:`~backend.workers.health.Backoff` delay (0.1 s
        doubling to 5 s, jittered) until Redis answers again; running jobs carry on.
        Jobs lost with Redis are re-dispatched by the sweeper from PostgreSQL.
        """
        if self._pool is None:
            self._pool = redis_client(self.redis_target)
        self.ctx["redis"] = self.pool
        self.ctx["health"] = self.health
        if self.on_startup:
            await self.on_startup(self.ctx)
        backoff = Backoff()
        try:
            while True:
                try:
                    # subscribe before looking at the queue: a job enqueued after the look
                    # then always leaves a message behind for the wait below
                    await self._subscribe()
                    await self._poll_iteration()
                    if self.burst and await self._burst_done():
                        return
                except (RedisError, OSError) as exc:  # any Redis trouble: back off, retry
                    raise_if_cancelling()
                    self.health.down("redis", exc)
                    await self._unsubscribe()
                    await self._reclaim_slots()
                    await asyncio.sleep(backoff.next())
                    continue
                self.health.up("redis")
                backoff.reset()
                await self._wait_for_work()
        finally:
            await self._unsubscribe()

    async def _burst_done(self) -> bool:
        """Burst mode: True (after the running jobs end) when there is nothing left to do."""
        if 0 <= self.max_burst_jobs <= self._jobs_started() or (
            await self.pool.zcard(self.queue_name) == 0
        ):
            await asyncio.gather(*self.tasks.values())
            return True
        return False

    async def _reclaim_slots(self) -> None:
        """Recount free job slots from the jobs actually running.

        arq's ``start_jobs`` takes a slot (semaphore and counter) before its Redis
        round trips and does not give it back when one of them fails; after a few outages
        a worker would have no slots left. Each running job's done-callback releases its
        slot on the new semaphore, so the counts stay exact.
        """
        await asyncio.sleep(0)  # let done-callbacks already scheduled release their slots
        running = sum(not t.done() for t in self.tasks.values())
        sem = asyncio.BoundedSemaphore(self.max_jobs)
        for _ in range(min(running, self.max_jobs)):
            await sem.acquire()  # never waits: the semaphore starts with every slot free
        self.sem = sem
        self.job_counter = running

    async def _subscribe(self) -> None:
        if self._wake is not None:
            return
        pubsub = self.pool.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(WAKE_CHANNEL)
        except (RedisError, OSError) as exc:
            log.debug("cannot subscribe to %s: %s (polling instead)", WAKE_CHANNEL, exc)
            await _close(pubsub)
            return
        self._wake = pubsub

    async def _unsubscribe(self) -> None:
        pubsub, self._wake = self._wake, None
        if pubsub is not None:
            await _close(pubsub)

    async def _wait_for_work(self) -> None:
        """Sleep until there may be a job to start (see the class docstring)."""
        if self._wake is None:  # no subscription (Redis trouble): poll, gently
            await asyncio.sleep(UNSUBSCRIBED_POLL_SECONDS)
            return
        if self.job_counter >= self.max_jobs:  # busy: look again when a slot may be free
            await asyncio.sleep(self.poll_delay_s)
            return
        timeout = await self._until_next_deferred()
        try:
            message = await self._wake.get_message(timeout=timeout)
            while message is not None:  # one look at the queue serves every pending wake-up
                message = await self._wake.get_message(timeout=0)
        except (RedisError, OSError) as exc:  # Redis gone or restarted: re-subscribe later
            raise_if_cancelling()
            log.debug("wake-up subscription lost: %s", exc)
            await self._unsubscribe()
            await asyncio.sleep(self.poll_delay_s)

    async def _until_next_deferred(self) -> float:
        """Seconds until the earliest job scored in the future, capped at ``idle_poll``."""
        now = timestamp_ms()
        try:
            due = await self.pool.zrangebyscore(
                self.queue_name, min=f"({now}", max="+inf", start=0, num=1, withscores=True
            )
        except (RedisError, OSError):
            return self.poll_delay_s
        if not due:
            return self.idle_poll_s
        return max(0.0, min(self.idle_poll_s, (float(due[0][1]) - now) / 1000))


def raise_if_cancelling() -> None:
    """Re-raise a cancellation that a Redis client call turned into a connection error.

    redis-py closes the connection of a read that is cancelled, and the error that close
    raises can replace the :class:`asyncio.CancelledError`; a loop that retries on Redis
    errors would then never stop. The task's pending cancel request (``cancelling()``,
    Python 3.11) still says it was cancelled.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _close(pubsub: PubSub) -> None:
    try:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
    except (RedisError, OSError) as exc:
        log.debug("closing the wake-up subscription: %s", exc)
