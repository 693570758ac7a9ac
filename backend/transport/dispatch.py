"""arq adapter of the engine's Dispatcher port (Redis is transport, never the truth)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from arq.connections import ArqRedis
from arq.constants import job_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms
from redis.exceptions import RedisError

from backend.observability import tracing
from backend.services.runs.channels import CANCEL_CHANNEL, CHANGED, WAKE_CHANNEL, run_channel

log = logging.getLogger(__name__)


MAX_BATCH = 256
"""Jobs and notices sent in one pipeline at most (:class:`ArqDispatcher`)."""


@dataclass(frozen=True, slots=True)
class _Job:
    """One job to enqueue: arq's key, its queue score (due time, epoch ms), its body and
    how long its key lives (ms)."""

    key: str
    job_id: str
    score: int
    body: bytes
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class _Notice:
    """One message to publish on ``channel``."""

    channel: str
    message: bytes


class ArqDispatcher:
    """Enqueue ``execute_step`` / ``advance_run`` jobs and publish run-change notices.

    With tracing on, each job carries the current trace context as its ``trace`` keyword
    argument (backend/observability/tracing.py). Each enqueue is followed by a message on
    :data:`~backend.workers.wake.WAKE_CHANNEL` that wakes idle workers (backend/workers/wake.py).
    Jobs and wake-up travel in ONE round trip (:meth:`_enqueue`), and the jobs that
    concurrent callers dispatch while one round trip is under way go together in the next
    (at most :data:`MAX_BATCH`), with one wake-up: the group commit of
    backend/db/group_commit.py applied to the queue. No waiting is added: a dispatch that
    finds no round trip under way is sent at once, alone. A dispatch returns once its job
    is in Redis (or its round trip failed), as before. Run-change notices (:meth:`notify`)
    travel the same way: a worker running many runs publishes their notices together.

    A Redis failure is logged, not raised: the work is durable in PostgreSQL and the
    sweeper dispatches it again.
    """

    def __init__(self, pool: ArqRedis) -> None:
        self.pool = pool
        self._failing = False
        self._waiting: list[tuple[_Job | _Notice, asyncio.Future[None]]] = []
        self._sender: asyncio.Task[None] | None = None
        self.batches = 0  # round trips sent (for benchmarks and tests)

    async def dispatch_step(self, run_id: str, step_id: str, *, delay: float | None = None) -> None:
        try:
            await self._enqueue("execute_step", run_id, step_id, delay=delay)
        except (RedisError, OSError) as exc:
            self._failed(f"step {run_id}/{step_id}", exc)

    async def dispatch_advance(self, run_id: str) -> None:
        try:
            await self._enqueue("advance_run", run_id)
        except (RedisError, OSError) as exc:
            self._failed(f"advance of {run_id}", exc)

    def _failed(self, what: str, exc: BaseException) -> None:
        """Log a failed enqueue: a warning for the first of an outage, debug for the rest."""
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        log.log(level, "could not enqueue %s: %s (the sweeper will)", what, exc)

    async def _enqueue(self, function: str, *args: str, delay: float | None = None) -> None:
        """Enqueue an arq job (after ``delay`` seconds) and wake the idle workers.

        What ``ArqRedis.enqueue_job`` writes (the job under ``arq:job:<id>`` serialized
        by arq's own ``serialize_job``, expiring ``expires_extra_ms`` after its due time; its
        id scored by the due time in ms in the queue), plus the wake-up message, in one
        ``MULTI``/``EXEC`` pipeline shared with the jobs dispatched at the same moment: one
        round trip instead of four per job. arq's ``WATCH`` and ``EXISTS`` guard against a
        caller-chosen job id that is already taken; these ids are fresh random UUIDs, so
        there is nothing to guard against. With tracing on, the job also carries the
        current trace context as its ``trace`` keyword argument. Raises what the round
        trip raised (``RedisError``, ``OSError``).
        """
        pool = self.pool
        defer_ms = round(delay * 1000) if delay and delay > 0 else 0
        job_id = uuid.uuid4().hex
        enqueued_ms = timestamp_ms()
        trace = tracing.carrier()  # empty while tracing is off: the job stays as it was
        kwargs = {"trace": trace} if trace else {}
        body = serialize_job(
            function, args, kwargs, None, enqueued_ms, serializer=pool.job_serializer
        )
        job = _Job(
            job_key_prefix + job_id,
            job_id,
            enqueued_ms + defer_ms,
            body,
            defer_ms + pool.expires_extra_ms,
        )
        await self._sent(job)
        if self._failing:
            self._failing = False
            log.warning("enqueueing works again")

    async def _sent(self, item: _Job | _Notice) -> None:
        """Send ``item`` with whatever else waits; raises what its round trip raised."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_waiting())
        await future

    async def _send_waiting(self) -> None:
        """Send the waiting jobs, :data:`MAX_BATCH` per round trip, until none wait; each
        caller learns its round trip's outcome. The one sender of the dispatcher."""
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
                try:
                    await self._send([item for item, _ in batch])
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                except BaseException:  # cancelled (the loop closing): so are its callers
                    for _, future in batch:
                        future.cancel()
                    raise
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)
        finally:
            self._sender = None
            if self._waiting:  # left by a cancelled sender: their callers must not hang
                self._sender = asyncio.create_task(self._send_waiting())

    async def _send(self, items: list[_Job | _Notice]) -> None:
        """``items`` in one ``MULTI``/``EXEC`` round trip, in order, and one wake-up when
        they hold a job."""
        jobs = [item for item in items if isinstance(item, _Job)]
        async with self.pool.pipeline(transaction=True) as pipe:
            for job in jobs:
                pipe.psetex(job.key, job.ttl_ms, job.body)
            if jobs:
                queue = self.pool.default_queue_name
                pipe.zadd(queue, {job.job_id: job.score for job in jobs})
            for item in items:
                if isinstance(item, _Notice):
                    pipe.publish(item.channel, item.message)
            if jobs:
                pipe.publish(WAKE_CHANNEL, b"")
            await pipe.execute()
        self.batches += 1

    async def notify(self, run_id: str, notice: bytes = CHANGED) -> None:
        """Publish ``notice`` on run ``run_id``'s channel (one ``PUBLISH``, in the round
        trip of whatever else is sent at the moment); a Redis failure is logged at debug
        level (listeners poll PostgreSQL)."""
        try:
            await self._sent(_Notice(run_channel(run_id), notice))
        except (RedisError, OSError) as exc:
            log.debug("could not publish change of %s: %s", run_id, exc)

    async def announce_cancel(self, run_id: str) -> None:
        try:
            await self.pool.publish(CANCEL_CHANNEL, run_id)
        except (RedisError, OSError) as exc:
            log.warning("could not announce the end of run %s: %s (leases will)", run_id, exc)
