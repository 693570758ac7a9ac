"""Installation-wide figures for ``/metrics`` and the dashboard: queue depth, oldest due
job, ready steps, live workers (Redis and PostgreSQL, read at scrape time).

Workers announce themselves with :func:`heartbeat`: a key ``railyard:worker:<name>``
that expires after :data:`WORKER_TTL` seconds unless renewed, so a killed worker drops out
of the count within that time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from arq.constants import default_queue_name
from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.observability import metrics
from backend.services.availability import database_unavailable

WORKER_KEY_PREFIX = "railyard:worker:"
WORKER_TTL = 30
"""Seconds a worker's heartbeat key lives; workers renew it every third of that."""


@dataclass
class Installation:
    """What the whole installation is doing now.

    ``queue_depth``: jobs due and not started (arq's queue, Redis); ``oldest_age``:
    seconds the oldest of them has waited; ``ready_steps``: steps ready to run now
    (PostgreSQL); ``workers``: live worker heartbeats. A server that does not answer
    leaves its figures ``None``.
    """

    queue_depth: int | None = None
    oldest_age: float | None = None
    ready_steps: int | None = None
    workers: int | None = None


async def heartbeat(redis: Redis, name: str) -> None:
    """Renew worker ``name``'s heartbeat key every ``WORKER_TTL / 3`` seconds until
    cancelled. Redis errors are skipped (the key expires; the next beat sets it again);
    :func:`forget_worker` removes it at shutdown."""
    key = WORKER_KEY_PREFIX + name
    while True:
        with contextlib.suppress(RedisError, OSError):
            await redis.set(key, str(time.time()), ex=WORKER_TTL)
        await asyncio.sleep(WORKER_TTL / 3)


async def forget_worker(redis: Redis, name: str) -> None:
    """Remove worker ``name``'s heartbeat (a stopping worker; errors are ignored)."""
    with contextlib.suppress(RedisError, OSError):
        await redis.delete(WORKER_KEY_PREFIX + name)


async def _redis_figures(redis: Redis, into: Installation) -> None:
    now_ms = time.time() * 1000
    try:
        into.queue_depth = int(await redis.zcount(default_queue_name, "-inf", now_ms))
        oldest = await redis.zrangebyscore(
            default_queue_name, "-inf", now_ms, start=0, num=1, withscores=True
        )
        into.oldest_age = max(0.0, (now_ms - oldest[0][1]) / 1000) if oldest else 0.0
        workers = 0
        async for _ in redis.scan_iter(match=WORKER_KEY_PREFIX + "*", count=500):
            workers += 1
        into.workers = workers
    except (RedisError, OSError):
        pass


async def _database_figures(
    sessionmaker: async_sessionmaker[AsyncSession], into: Installation
) -> None:
    try:
        async with sessionmaker() as session:
            into.ready_steps = int(
                (
                    await session.execute(
                        text(
                            "select count(*) from step_runs where status = 'ready'"
                            " and (not_before is null or not_before <= now())"
                        )
                    )
                ).scalar_one()
            )
    except Exception as exc:  # database down: the figure stays unknown
        if not database_unavailable(exc):
            raise


async def installation(
    sessionmaker: async_sessionmaker[AsyncSession], redis: Redis
) -> Installation:
    """Read the installation figures (each server asked once, concurrently)."""
    figures = Installation()
    await asyncio.gather(_redis_figures(redis, figures), _database_figures(sessionmaker, figures))
    return figures


async def refresh_gauges(sessionmaker: async_sessionmaker[AsyncSession], redis: Redis) -> None:
    """Set the installation gauges of :mod:`backend.observability.metrics` (unknown
    figures keep their last value)."""
    figures = await installation(sessionmaker, redis)
    if figures.queue_depth is not None:
        metrics.QUEUE_DEPTH.set(figures.queue_depth)
    if figures.oldest_age is not None:
        metrics.QUEUE_OLDEST_AGE.set(figures.oldest_age)
    if figures.ready_steps is not None:
        metrics.READY_STEPS.set(figures.ready_steps)
    if figures.workers is not None:
        metrics.WORKERS.set(figures.workers)
