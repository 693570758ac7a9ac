"""Test calls of a webhook: the designer's "Listen for test call" window.

While a workflow listens (for :data:`LISTEN_SECONDS` after the designer asks), its test
URL ``/hooks/test/<token>`` accepts one request; the flag is a Redis key with that
expiry, cleared when the test call arrives. Losing it (a Redis flush) only ends the
window early.
"""

from __future__ import annotations

import uuid

from redis.asyncio import Redis

LISTEN_SECONDS = 120
"""How long a workflow listens for a test call, in seconds."""


def listen_key(workflow_id: uuid.UUID | str) -> str:
    """Redis key set while the designer listens for a test call."""
    return f"railyard:webhook-listen:{workflow_id}"


async def start_listening(redis: Redis, workflow_id: uuid.UUID) -> None:
    """Open (or re-open) the listening window of ``workflow_id`` for LISTEN_SECONDS."""
    await redis.set(listen_key(workflow_id), "1", ex=LISTEN_SECONDS)


async def is_listening(redis: Redis, workflow_id: uuid.UUID) -> bool:
    """True while ``workflow_id``'s listening window is open."""
    return bool(await redis.get(listen_key(workflow_id)))


async def stop_listening(redis: Redis, workflow_id: uuid.UUID) -> None:
    """Close the listening window (a test call arrived, accepted or refused)."""
    await redis.delete(listen_key(workflow_id))
