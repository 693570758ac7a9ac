"""arq adapter of the engine's Dispatcher port (Redis is transport, never the truth)."""

from __future__ import annotations

import logging

from arq.connections import ArqRedis
from redis.exceptions import RedisError

from backend.services.channels import run_channel

log = logging.getLogger(__name__)


class ArqDispatcher:
    """Enqueue ``execute_step`` / ``advance_run`` jobs and publish run-change notices.

    A Redis failure is logged, not raised: the work is durable in PostgreSQL and the
    sweeper dispatches it again.
    """

    def __init__(self, pool: ArqRedis) -> None:
        self.pool = pool

    async def dispatch_step(self, run_id: str, step_id: str, *, delay: float | None = None) -> None:
        try:
            await self.pool.enqueue_job(
                "execute_step", run_id, step_id, _defer_by=delay if delay and delay > 0 else None
            )
        except (RedisError, OSError) as exc:
            log.warning("could not enqueue step %s/%s: %s (the sweeper will)", run_id, step_id, exc)

    async def dispatch_advance(self, run_id: str) -> None:
        try:
            await self.pool.enqueue_job("advance_run", run_id)
        except (RedisError, OSError) as exc:
            log.warning("could not enqueue advance of %s: %s (the sweeper will)", run_id, exc)

    async def notify(self, run_id: str) -> None:
        try:
            await self.pool.publish(run_channel(run_id), "changed")
        except (RedisError, OSError) as exc:
            log.debug("could not publish change of %s: %s", run_id, exc)
