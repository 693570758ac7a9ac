"""Following a run as it changes: the webhook's wait for an answer, the run page's live feed.

PostgreSQL holds the truth; Redis pub/sub notices on :func:`run_channel` only say "look
again". Both watchers read the run, and when they need more, wait for the next notice at
most a second before reading again, so a lost notice delays an update by a second and
never loses it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import msgspec
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Run
from backend.engine.states import RunStatus
from backend.services import run_values, runs
from backend.services.channels import run_channel

POLL_SECONDS = 1.0
"""Longest wait for a change notice before the run is read again."""


async def wait_for_answer(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: Redis,
    run_id: uuid.UUID,
    timeout: float,
    *,
    last_step: bool = False,
) -> dict[str, Any] | None:
    """Wait up to ``timeout`` seconds for the run's webhook answer.

    ``last_step=False`` (response mode ``respond_node``): the Respond step's
    ``{"status", "headers", "body"}``; ``last_step=True``: 200 with the run's output once it
    succeeded. A run that failed, was cancelled or timed out gives a 500 answer naming the
    error; ``None`` on timeout (or a run that ended without an answer).
    """
    pubsub = redis.pubsub()
    await pubsub.subscribe(run_channel(str(run_id)))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            async with sessionmaker() as session:
                row = (
                    await session.execute(
                        select(Run.status, Run.response, Run.error, Run.output).where(
                            Run.id == run_id
                        )
                    )
                ).one()
                status, response, error, output = row
                if status == "succeeded" and last_step:
                    output = await run_values.full_value(session, output)
            if response is not None and not last_step:
                return dict(response)
            if status in ("failed", "cancelled", "timed_out"):
                return {
                    "status": 500,
                    "headers": {},
                    "body": {"run_id": str(run_id), "status": status, "error": error},
                }
            if status == "succeeded":
                if last_step:
                    return {"status": 200, "headers": {}, "body": output}
                return None
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await pubsub.get_message(
                ignore_subscribe_messages=True, timeout=min(remaining, POLL_SECONDS)
            )
    finally:
        await pubsub.unsubscribe()
        await pubsub.aclose()


async def run_updates(
    sessionmaker: async_sessionmaker[AsyncSession], redis: Redis, run_id: uuid.UUID
) -> AsyncGenerator[bytes, None]:
    """The run's detail as JSON (:func:`backend.services.runs.get_run_detail`), once now and
    again after every change, until the run ends (or is deleted). A Redis error while
    waiting for a notice only turns the wait into a one-second poll."""
    pubsub = redis.pubsub()
    await pubsub.subscribe(run_channel(str(run_id)))
    last = b""
    try:
        while True:
            async with sessionmaker() as session:
                found = await runs.get_run_detail(session, run_id)
            if found is None:
                return
            payload = msgspec.json.encode(found[0])
            if payload != last:
                last = payload
                yield payload
            if RunStatus(found[0].status).terminal:
                return
            try:
                await pubsub.get_message(ignore_subscribe_messages=True, timeout=POLL_SECONDS)
            except Exception:
                await asyncio.sleep(POLL_SECONDS)
    finally:
        await pubsub.unsubscribe()
        await pubsub.aclose()
