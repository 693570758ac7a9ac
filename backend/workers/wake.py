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

from arq.jobs import SerializationError, deserialize_job_raw
from arq.utils import ms_to_datetime, timestamp_ms
from arq.worker import Worker
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from backend.services.runs.channels import WAKE_CHANNEL
from backend.transport.redis_client import RedisTarget, redis_client
from backend.workers.health import Backoff, ServiceHealth
from backend.workers.pickup import JobTaker, TakenJob

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

    Jobs are taken with one atomic script call per look at the queue and run without
    arq's per-job bookkeeping keys (:meth:`_poll_iteration`, backend/workers/pickup.py).
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
        self._taker: JobTaker | None = None
        # score (epoch ms) of the first job the last take left queued; None: queue empty
        self._first_left: int | None = None
        self._first_left_known = False

    async def main(self) -> None:
        """Poll loop that rides out Redis outages of any length.

        A Redis connection error anywhere in one iteration marks Redis down in
        :attr:`health` (one log line) and retries after a
        :class:`~backend.workers.health.Backoff` delay (0.1 s doubling to 5 s, jittered)
        until Redis answers again; running jobs carry on.
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
                # a cancellation that a Redis call turned into an error somewhere below and
                # that was handled as an outage still ends the loop here
                raise_if_cancelling()
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

    async def _poll_iteration(self) -> None:
        """Take due jobs with one :class:`~backend.workers.pickup.JobTaker` call and start
        them; forget ended job tasks; record arq's health key when due.

        Replaces arq 0.28's ``_poll_iteration`` + ``start_jobs`` (backend/workers/pickup.py
        tells what is left out and why). Takes at most the free slots (``max_jobs`` minus
        running jobs), ``queue_read_limit``, and in burst mode what ``max_burst_jobs``
        leaves; a slot (semaphore and counter) is taken only once the job is in hand, so a
        failed Redis call leaves the slot counts as they were. Nothing is taken while
        ``allow_pick_jobs`` is off.
        """
        self._first_left_known = False
        limit = min(self.queue_read_limit, self.max_jobs - self.job_counter)
        if self.burst and self.max_burst_jobs >= 0:
            limit = min(limit, self.max_burst_jobs - self._jobs_started())
        if self.allow_pick_jobs and limit > 0:
            if self._taker is None:
                self._taker = JobTaker(self.pool, self.queue_name)
            taken, self._first_left = await self._taker.take(timestamp_ms(), limit)
            self._first_left_known = True
            for job in taken:
                await self.sem.acquire()  # never waits: at most the free slots were taken
                self.job_counter += 1
                task = asyncio.create_task(self._run_taken(job))
                task.add_done_callback(self._job_ended)
                self.tasks[job.job_id] = task
        for job_id, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[job_id]
                task.result()  # _run_taken swallows job errors: this re-raises only bugs
        await self.heart_beat()

    def _job_ended(self, _task: asyncio.Task[None]) -> None:
        self.job_counter -= 1
        self.sem.release()

    async def _run_taken(self, job: TakenJob) -> None:
        """Run one taken job like arq's ``run_job`` does for a first try: the function from
        arq's table (``self.functions``), ctx = the worker's ctx plus ``job_id``,
        ``job_try`` (1), ``enqueue_time``, ``score``; the function's or the worker's
        ``job_timeout``; the ``on_job_start`` / ``on_job_end`` / ``after_job_end`` hooks;
        the ``jobs_complete`` / ``jobs_failed`` counters. A job that fails, times out or is
        cancelled is logged and counted, never re-queued (``max_tries=1``): its work is in
        PostgreSQL and the sweeper picks it up. Start and end are logged at DEBUG (arq logs
        them at INFO, two formatted lines per job on the hot path).
        """
        if not job.body:
            log.warning("job %s expired before it was taken", job.job_id)
            self.jobs_failed += 1
            return
        try:
            name, args, kwargs, _try, enqueued_ms = deserialize_job_raw(
                job.body, deserializer=self.job_deserializer
            )
            function = self.functions[name]
        except (SerializationError, KeyError) as exc:
            log.warning("job %s cannot run: %s", job.job_id, exc)
            self.jobs_failed += 1
            return
        ctx = {
            **self.ctx,
            "job_id": job.job_id,
            "job_try": 1,
            "enqueue_time": ms_to_datetime(enqueued_ms),
            "score": job.score,
        }
        timeout = self.job_timeout_s if function.timeout_s is None else function.timeout_s
        if self.on_job_start:
            await self.on_job_start(ctx)
        log.debug("job %s: %s started", job.job_id, name)
        try:
            async with asyncio.timeout(timeout):
                await function.coroutine(ctx, *args, **kwargs)
        except (Exception, asyncio.CancelledError) as exc:
            self.jobs_failed += 1
            if isinstance(exc, asyncio.CancelledError):
                log.info("job %s: %s cancelled (the sweeper recovers its work)", job.job_id, name)
            else:
                log.exception("job %s: %s failed", job.job_id, name)
        else:
            self.jobs_complete += 1
            log.debug("job %s: %s done", job.job_id, name)
        if self.on_job_end:
            await self.on_job_end(ctx)
        if self.after_job_end:
            await self.after_job_end(ctx)

    async def _subscribe(self) -> None:
        if self._wake is not None:
            return
        pubsub = self.pool.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(WAKE_CHANNEL)
        except (RedisError, OSError) as exc:
            raise_if_cancelling()
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
        """Seconds until the earliest job scored in the future, capped at ``idle_poll``.

        Known without a round trip when this iteration's take reported the first job it
        left queued (a job enqueued since then publishes a wake-up); else asked of Redis.
        """
        now = timestamp_ms()
        if self._first_left_known:
            if self._first_left is None:
                return self.idle_poll_s
            return max(0.0, min(self.idle_poll_s, (self._first_left - now) / 1000))
        try:
            due = await self.pool.zrangebyscore(
                self.queue_name, min=f"({now}", max="+inf", start=0, num=1, withscores=True
            )
        except (RedisError, OSError):
            raise_if_cancelling()
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
