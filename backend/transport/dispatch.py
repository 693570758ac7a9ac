"""arq adapter of the engine's Dispatcher port (Redis is transport, never the truth)."""

from __future__ import annotations

import logging
import uuid

from arq.connections import ArqRedis
from arq.constants import job_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms
from redis.exceptions import RedisError

from backend.observability import tracing
from backend.services.runs.channels import CANCEL_CHANNEL, CHANGED, WAKE_CHANNEL, run_channel

log = logging.getLogger(__name__)


class ArqDispatcher:
    """Enqueue ``execute_step`` / ``advance_run`` jobs and publish run-change notices.

    With tracing on, each job carries the current trace context as its ``trace`` keyword
    argument (backend/observability/tracing.py). Each enqueue is followed by a message on
    :data:`~backend.workers.wake.WAKE_CHANNEL` that wakes idle workers (backend/workers/wake.py).
    Job and wake-up travel in ONE round trip (:meth:`_enqueue`).

    A Redis failure is logged, not raised: the work is durable in PostgreSQL and the
    sweeper dispatches it again.
    """

    def __init__(self, pool: ArqRedis) -> None:
        self.pool = pool
        self._failing = False

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

        What ``ArqRedis.enqueue_job`` writes (the job under ``arq:job:<id>`` serialized by
        arq's own ``serialize_job``, expiring ``expires_extra_ms`` after its due time; its
        id scored by the due time in ms in the queue), plus the wake-up message, in one
        ``MULTI``/``EXEC`` pipeline: one round trip instead of four. arq's ``WATCH`` and
        ``EXISTS`` guard against a caller-chosen job id that is already taken; these ids
        are fresh random UUIDs, so there is nothing to guard against. With tracing on, the
        job also carries the current trace context as its ``trace`` keyword argument.
        """
        pool = self.pool
        defer_ms = round(delay * 1000) if delay and delay > 0 else 0
        job_id = uuid.uuid4().hex
        enqueued_ms = timestamp_ms()
        trace = tracing.carrier()  # empty while tracing is off: the job stays as it was
        kwargs = {"trace": trace} if trace else {}
        job = serialize_job(
            function, args, kwargs, None, enqueued_ms, serializer=pool.job_serializer
        )
        async with pool.pipeline(transaction=True) as pipe:
            pipe.psetex(job_key_prefix + job_id, defer_ms + pool.expires_extra_ms, job)
            pipe.zadd(pool.default_queue_name, {job_id: enqueued_ms + defer_ms})
            pipe.publish(WAKE_CHANNEL, b"")
            await pipe.execute()
        if self._failing:
            self._failing = False
            log.warning("enqueueing works again")

    async def notify(self, run_id: str, notice: bytes = CHANGED) -> None:
        """Publish ``notice`` on run ``run_id``'s channel (one ``PUBLISH``); a Redis
        failure is logged at debug level (listeners poll PostgreSQL)."""
        try:
            await self.pool.publish(run_channel(run_id), notice)
        except (RedisError, OSError) as exc:
            log.debug("could not publish change of %s: %s", run_id, exc)

    async def announce_cancel(self, run_id: str) -> None:
        try:
            await self.pool.publish(CANCEL_CHANNEL, run_id)
        except (RedisError, OSError) as exc:
            log.warning("could not announce the end of run %s: %s (leases will)", run_id, exc)
