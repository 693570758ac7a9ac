"""The poller: polling triggers called on their interval, each new item one run.

Runs in the scheduler's leader (:mod:`backend.workers.scheduler`), beside schedule
firing: :func:`run_polls` keeps up to :data:`CONCURRENT_POLLS` polls running and claims
the next due subscription as soon as one ends, so a slow vendor holds up its own poll
only (:func:`poll_due` is one pass over everything due, for tests and tools). A poll:

1. Claim due subscriptions (``next_poll_at <= now``, ``FOR UPDATE SKIP LOCKED``, oldest
   due first, none being polled already) and move their ``next_poll_at`` one interval
   on, in one transaction: a leader that dies mid-poll delays the subscription by at
   most one interval, and two leaders (a failover) never poll the same one at once.
   Claimed only when a poll can start, subscriptions due together (many published at
   once, a leader back after an outage) are claimed, and so next due, as the polls
   before them end: the burst spreads itself over the following intervals.
2. Call the claimed trigger's ``poll(config, cursor)`` (bounded by its interval, at
   least 30 s).
3. In one transaction per subscription: store the new events in the inbox (unique per
   item id) and the new cursor, unless the subscription changed meanwhile (a new
   revision starts from its own baseline). The cursor only moves from the one the poll
   started from: a leader deposed mid-poll (its lock's session ended, its poll not yet
   cancelled) that stores after the new leader polled keeps its events, never its older
   cursor, so the stored cursor never goes back. The first poll of a revision only
   takes the baseline (its cursor), starting no runs, unless the user chose "include
   existing items".
4. Start the stored events' runs (:func:`backend.services.triggers.events.inbox.start_stored`,
   from the events in memory).

A crash between 3 and 4 leaves stored events whose runs the sweep starts; a crash
before 3 polls again from the old cursor, and the item ids keep it to one run per item.
A failed poll backs off: ``max(floor, backoff)``, where the floor is the trigger's
``min_interval`` and the backoff is exponential from 5 s up to an hour
(:func:`~backend.services.triggers.events.subscriptions.backoff`), or the connector's
``retry_after`` (HTTP ``Retry-After`` on 429 and 503) when longer; the error is on the
workflow page until a poll succeeds.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from backend.db.models import TriggerSubscription
from backend.engine.ports import Clock
from backend.observability import metrics
from backend.services.availability import database_unavailable
from backend.services.triggers.events.contexts import EventEnv, TriggerSite
from backend.services.triggers.events.inbox import (
    InvalidEvent,
    Source,
    Stored,
    encode_event,
    insert_encoded,
    start_stored,
)
from backend.services.triggers.events.subscriptions import backoff, connector_config
from connectors import sdk

log = logging.getLogger(__name__)

CONCURRENT_POLLS = 8
"""Polls one leader runs at the same time."""

CLAIM_BATCH = 50
"""Subscriptions claimed per pass."""


@dataclass(frozen=True)
class Claimed:
    """A subscription claimed for one poll (a snapshot; the row may change meanwhile)."""

    id: uuid.UUID
    site: TriggerSite
    kind: str
    config: dict[str, Any]
    cursor: Any
    baseline: bool
    due_at: datetime
    interval: float


async def claim_due(
    env: EventEnv,
    now: datetime,
    limit: int = CLAIM_BATCH,
    skip: Collection[uuid.UUID] = (),
) -> list[Claimed]:
    """Claim up to ``limit`` due polling subscriptions, oldest due first, but those of
    ``skip`` (being polled already); see the module doc, step 1."""
    claimed: list[Claimed] = []
    query = (
        select(TriggerSubscription)
        .where(
            TriggerSubscription.enabled,
            TriggerSubscription.kind == "polling",
            TriggerSubscription.next_poll_at <= now,
        )
        .order_by(TriggerSubscription.next_poll_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    if skip:
        query = query.where(TriggerSubscription.id.not_in(list(skip)))
    async with env.sessionmaker() as session, session.begin():
        rows = (await session.execute(query)).scalars()
        for row in rows:
            assert row.next_poll_at is not None
            claimed.append(
                Claimed(
                    id=row.id,
                    site=TriggerSite(
                        row.workflow_id,
                        row.version_number,
                        row.step_id,
                        row.node_type,
                        row.revision,
                    ),
                    kind=row.kind,
                    config=dict(row.config),
                    cursor=row.cursor,
                    baseline=not row.baseline_taken and not row.include_existing,
                    due_at=row.next_poll_at,
                    interval=row.interval_seconds,
                )
            )
            row.next_poll_at = now + timedelta(seconds=row.interval_seconds)
    return claimed


async def poll_one(env: EventEnv, claim: Claimed, clock: Clock) -> int:
    """Poll one claimed subscription, store what it found, start the runs; returns how
    many runs it started. Failures are recorded on the subscription, never raised, but
    for a lost database."""
    started_at = clock.now()
    metrics.poll_lag((started_at - claim.due_at).total_seconds())
    definition = env.definition(claim.site.node_type)
    try:
        if definition is None:
            raise sdk.ConfigError(
                f"the node type {claim.site.node_type} is not installed on this server"
            )
        result = await asyncio.wait_for(
            definition.call(
                "poll", connector_config(claim.config), env.context(claim.site), claim.cursor
            ),
            timeout=max(30.0, claim.interval),
        )
        if not isinstance(result, sdk.PollResult):
            raise TypeError(f"poll returned {type(result).__name__}, not PollResult")
        new = await _store(env, claim, result, clock.now())
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if database_unavailable(exc):
            raise
        floor = float(definition.min_interval) if definition is not None else 0.0
        await _failed(env, claim, exc, clock.now(), floor)
        return 0
    return len(await start_stored(env.sessionmaker, env.execution, new))


async def _store(
    env: EventEnv, claim: Claimed, result: sdk.PollResult, now: datetime
) -> list[Stored]:
    """Store the poll's events and cursor (step 3); the new events, to start."""
    encoded = [encode_event(event, baseline=claim.baseline) for event in result.events]
    async with env.sessionmaker() as session, session.begin():
        row = await session.get(TriggerSubscription, claim.id, with_for_update=True)
        if row is None or not row.enabled or row.revision != claim.site.revision:
            return []  # changed while polling: the new revision polls from its own baseline
        source = Source(claim.site.workflow_id, row.version_number, row.node_type, row.kind)
        found = await insert_encoded(session, source, encoded, now, baseline=claim.baseline)
        new = [
            Stored(row_id, source.workflow_id, source.version_number, source.kind, event.data)
            for event, row_id in zip(result.events, found, strict=True)
            if row_id is not None
        ]
        if claim.baseline:
            new = []  # remembered, never started
        else:
            metrics.trigger_events(row.kind, row.node_type, len(new), len(result.events) - len(new))
            if new:
                row.last_event_at = now
        if result.cursor is not None and row.cursor == claim.cursor:
            row.cursor = result.cursor  # else a later poll stored its own: never go back
        row.baseline_taken = True
        row.last_polled_at = now
        row.failures = 0
        row.last_error = None
        row.last_error_at = None
    return new


async def _failed(
    env: EventEnv, claim: Claimed, exc: BaseException, now: datetime, floor: float
) -> None:
    """Record the failed poll and when to poll again (the module doc's backoff, never
    sooner than ``floor`` seconds)."""
    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    if isinstance(exc, TimeoutError):
        message = f"the poll took longer than {max(30.0, claim.interval):g} s"
    if isinstance(exc, InvalidEvent):
        message = f"the trigger returned an invalid event: {exc}"
    log.warning(
        "poll of %s (workflow %s) failed: %s", claim.site.node_type, claim.site.workflow_id, message
    )
    metrics.trigger_failure(claim.kind, claim.site.node_type)
    async with env.sessionmaker() as session, session.begin():
        row = await session.get(TriggerSubscription, claim.id, with_for_update=True)
        if row is None or row.revision != claim.site.revision:
            return
        row.failures = (row.failures or 0) + 1
        row.last_error = str(message)[:2000]
        row.last_error_at = now
        row.last_polled_at = now
        delay = backoff(row.failures, floor=floor)
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > delay.total_seconds():
            delay = timedelta(seconds=float(retry_after))
        row.next_poll_at = now + max(delay, timedelta(seconds=0))


async def poll_due(env: EventEnv, clock: Clock) -> int:
    """One pass at ``clock.now()``: claim, poll, store, start; returns the runs started."""
    claimed = await claim_due(env, clock.now())
    if not claimed:
        return 0
    gate = asyncio.Semaphore(CONCURRENT_POLLS)

    async def one(claim: Claimed) -> int:
        async with gate:
            return await poll_one(env, claim, clock)

    results = await asyncio.gather(*(one(c) for c in claimed), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return sum(r for r in results if isinstance(r, int))


async def next_due(env: EventEnv, skip: Collection[uuid.UUID] = ()) -> datetime | None:
    """The earliest ``next_poll_at`` of an enabled polling subscription (but ``skip``)."""
    query = (
        select(TriggerSubscription.next_poll_at)
        .where(TriggerSubscription.enabled, TriggerSubscription.kind == "polling")
        .order_by(TriggerSubscription.next_poll_at)
        .limit(1)
    )
    if skip:
        query = query.where(TriggerSubscription.id.not_in(list(skip)))
    async with env.sessionmaker() as session:
        found: datetime | None = (await session.execute(query)).scalar_one_or_none()
        return found


async def run_polls(
    env: EventEnv,
    clock: Clock,
    stop: asyncio.Event,
    *,
    tick: float = 1.0,
    concurrency: int = CONCURRENT_POLLS,
) -> None:
    """Poll until ``stop`` is set: up to ``concurrency`` polls run at a time, and as soon as
    one ends the next due subscription is claimed, so a slow vendor holds up its own
    poll only, never the others' (no pass waits for its slowest poll). Wakes at the next
    due poll, at most ``tick`` seconds apart. A failed claim is logged and tried again;
    a poll that lost the database is logged (the leader notices the loss itself)."""
    running: dict[uuid.UUID, asyncio.Task[int]] = {}
    woken = asyncio.Event()

    def ended(claim_id: uuid.UUID, task: asyncio.Task[int]) -> None:
        running.pop(claim_id, None)
        woken.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("poll of subscription %s failed", claim_id, exc_info=task.exception())

    try:
        while not stop.is_set():
            due = None
            try:
                free = concurrency - len(running)
                if free > 0:
                    for claim in await claim_due(env, clock.now(), free, skip=list(running)):
                        task = asyncio.create_task(poll_one(env, claim, clock))
                        running[claim.id] = task
                        task.add_done_callback(functools.partial(ended, claim.id))
                if len(running) < concurrency:
                    due = await next_due(env, skip=list(running))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("polling pass failed")
            wait = tick
            if due is not None:
                wait = min(tick, max(0.0, (due - clock.now()).total_seconds()))
            woken.clear()
            await _first(stop, woken, max(wait, 0.01))
    finally:
        for task in running.values():
            task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)


async def _first(stop: asyncio.Event, woken: asyncio.Event, timeout: float) -> None:
    """Return when ``stop`` or ``woken`` is set, or after ``timeout`` seconds."""
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(woken.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
