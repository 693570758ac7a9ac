"""The idempotency key a webhook delivery starts its run with.

``Idempotency-Key`` or the trigger's delivery-id header (e.g. ``X-GitHub-Delivery``), or a
CloudEvent's ``source`` and ``id``, becomes ``webhook:<workflow id>:<value>`` (at most 150
characters of the value): a repeated delivery returns the original run for the trigger's
``idempotency_hours`` (default 24); a run holding the key longer lets it go first, so the
delivery starts anew.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.engine.ports import Clock
from backend.services.triggers import webhooks as hooks

__all__ = ["DeliveryKeys"]


class DeliveryKeys:
    """Idempotency keys of one process's deliveries (see the module doc)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], clock: Clock) -> None:
        self.sessionmaker = sessionmaker
        self.clock = clock

    async def for_request(self, endpoint: hooks.Endpoint, headers: dict[str, str]) -> str | None:
        """The key of a request (``headers`` lower-case), ``None`` without one."""
        value = headers.get("idempotency-key")
        delivery_header = (endpoint.config.delivery_id_header or "").strip().lower()
        if not value and delivery_header:
            value = headers.get(delivery_header)
        return await self.held(endpoint, value) if value else None

    async def held(self, endpoint: hooks.Endpoint, value: str) -> str:
        """The key of a delivery identified by ``value``, released first when its run is
        older than the trigger's window."""
        key = f"webhook:{endpoint.workflow_id}:{value[:150]}"
        async with self.sessionmaker() as session, session.begin():
            cutoff = hooks.idempotency_cutoff(self.clock.now(), endpoint.config.idempotency_hours)
            await hooks.release_expired_key(session, key, cutoff)
        return key
