"""Large run values as the API and pages show them, and their downloads.

Run values larger than the inline limit are stored once, by reference
(backend/db/payloads.py). A run's detail does not carry them whole: each reference becomes
a bounded *preview*::

    {"$railyard.payload": "<sha256>", "bytes": 5242880, "summary": "list of 10000 items",
     "preview": "[{\\"id\\": 0, ...…", "download_url": "/api/runs/<run id>/values/<sha256>"}

``preview`` holds at most :data:`~backend.db.payloads.PREVIEW_CHARS` characters of the
value's JSON text. The download returns the whole value (nested large parts included) and
needs what reading the run needs.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import msgspec
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db import payloads
from backend.db.models import Payload

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

# Does any value column of the run hold this reference? (jsonb text contains the digest)
_REFERENCED = text(
    """
    SELECT EXISTS (SELECT FROM runs WHERE id = :run_id AND
                   concat(input::text, output::text, error::text) LIKE :pattern)
        OR EXISTS (SELECT FROM step_runs WHERE run_id = :run_id AND
                   concat(input::text, output::text, error::text, data::text) LIKE :pattern)
        OR EXISTS (SELECT FROM attempts WHERE run_id = :run_id AND
                   concat(input::text, config::text, output::text, error::text) LIKE :pattern)
    """
)


async def with_previews(session: AsyncSession, run_id: uuid.UUID, values: list[Any]) -> list[Any]:
    """``values`` (of run ``run_id``) with each reference to a large value replaced by its
    preview (module doc); the values are changed in place where they are containers."""
    wanted: set[str] = set()
    for value in values:
        payloads.references(value, wanted)
    if not wanted:
        return values
    rows = await session.execute(
        select(Payload.sha256, Payload.size_bytes, Payload.summary, Payload.preview).where(
            Payload.sha256.in_(list(wanted))
        )
    )
    table = {
        digest: {
            payloads.MARKER: digest,
            "bytes": size,
            "summary": summary,
            "preview": preview,
            "download_url": f"/api/runs/{run_id}/values/{digest}",
        }
        for digest, size, summary, preview in rows
    }
    return [payloads.substitute(value, table) for value in values]


async def download(session: AsyncSession, run_id: uuid.UUID, digest: str) -> bytes | None:
    """The JSON text of large value ``digest`` of run ``run_id`` (nested large parts put
    back), or ``None`` when the run does not hold that value."""
    if not _SHA256.match(digest):
        return None
    held = (
        await session.execute(_REFERENCED, {"run_id": run_id, "pattern": f'%"{digest}"%'})
    ).scalar_one()
    if not held:
        return None
    data = (
        await session.execute(select(Payload.data).where(Payload.sha256 == digest))
    ).scalar_one_or_none()
    if data is None or payloads.MARKER.encode() not in data:
        return data
    (value,) = await payloads.resolve_values(session, [msgspec.json.decode(data)])
    return msgspec.json.encode(value)


async def full_value(session: AsyncSession, value: Any) -> Any:
    """``value`` as read from a run column, with its large parts put back whole (for a
    webhook answering with the run's output)."""
    (resolved,) = await payloads.resolve_values(session, [value])
    return resolved
