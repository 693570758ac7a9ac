"""The event subscription loop the leading scheduler runs: produce deliveries from the
outbox, then send what is due, every ``RAILYARD_EVENT_DELIVERY_TICK`` seconds (at once
again while there is work)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.services.subscriptions.producing import DeliveryProducer
from backend.services.subscriptions.sending import (
    DeliverySender,
    delivery_client,
    retry_policy,
)
from backend.settings import Settings

log = logging.getLogger(__name__)


async def run_event_deliveries(
    sessionmaker: async_sessionmaker[AsyncSession],
    settings: Settings,
    stop: asyncio.Event,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """Produce and send until ``stop`` is set; a failed pass (database outage) is logged
    and tried again next tick (nothing is lost: positions and deliveries are stored)."""
    producer = DeliveryProducer(sessionmaker, settings.base_url)
    async with delivery_client(settings) as client:
        sender = DeliverySender(sessionmaker, client, retry_policy(settings), now=now)
        while not stop.is_set():
            busy = 0
            try:
                busy = await producer.index_once() + await sender.send_due()
            except Exception:
                log.exception("event subscription pass failed; retrying")
            if not busy:
                try:
                    await asyncio.wait_for(stop.wait(), settings.event_delivery_tick)
                except TimeoutError:
                    pass
