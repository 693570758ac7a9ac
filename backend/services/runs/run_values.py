"""Large run values as the API and pages show them, and their downloads.

Run values larger than the inline limit are stored once, by reference
(backend/db/payloads.py). A run's detail does not carry them whole: each reference becomes
a bounded *preview*::

    {"$railyard.payload": "<sha256>", "bytes": 5242880, "summary": "list of 10000 items",
     "preview": "[{\\"id\\": 0, ...…",
     "download_url": "<base URL>/api/v1/runs/<run id>/values/<sha256>"}

``preview`` holds at most :data:`~backend.db.payloads.PREVIEW_CHARS` characters of the
value's JSON text; ``download_url`` is absolute, on the installation's base URL
(``RAILYARD_BASE_URL``, docs/api.md "Answers"). The download returns the whole value
(nested large parts included) and needs what reading the run needs.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import msgspec
from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db import payload_holders, payloads
from backend.db.models import Payload

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

# The run's value columns as stored (references in them are the engine's own wrappers)
_COLUMNS = text(
    """
    SELECT jsonb_build_array(input, output, error) AS values FROM runs WHERE id = :run_id
    UNION ALL
    SELECT jsonb_build_array(input, output, error, data) FROM step_runs WHERE run_id = :run_id
    UNION ALL
    SELECT jsonb_build_array(input, config, output, error) FROM attempts WHERE run_id = :run_id
    """
).columns(values=JSONB)


async def with_previews(
    session: AsyncSession, run_id: uuid.UUID, values: list[Any], base_url: str
) -> list[Any]:
    """``values`` (of run ``run_id``) with each reference to a large value replaced by its
    preview (module doc), its ``download_url`` on ``base_url`` (``https://host``, a
    trailing ``/`` ignored); the values are changed in place where they are containers."""
    base = base_url.rstrip("/")
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
            "download_url": f"{base}/api/v1/runs/{run_id}/values/{digest}",
        }
        for digest, size, summary, preview in rows
    }
    return [payloads.substitute(value, table) for value in values]


async def holds(session: AsyncSession, run_id: uuid.UUID, digest: str) -> bool:
    """Whether run ``run_id`` holds large value ``digest``: one of its value columns (run,
    steps, attempts) references it through the engine's own wrapper, directly or nested
    in a value it references (:func:`backend.db.payload_holders.held_through`). Text that
    merely contains the digest, or a wrapper a caller forged in its data (stored
    escaped), holds nothing."""
    columns = [row for (row,) in await session.execute(_COLUMNS, {"run_id": run_id})]
    direct = payload_holders.held_by(columns)
    return bool(direct) and await payload_holders.held_through(session, direct, digest)


async def download(session: AsyncSession, run_id: uuid.UUID, digest: str) -> bytes | None:
    """The JSON text of large value ``digest`` of run ``run_id`` (nested large parts put
    back, escaped user data as it was sent), or ``None`` when the run does not hold that
    value (:func:`holds`). Who may read the run is the route's guard's question, asked at
    each request."""
    if not _SHA256.match(digest) or not await holds(session, run_id, digest):
        return None
    data = (
        await session.execute(select(Payload.data).where(Payload.sha256 == digest))
    ).scalar_one_or_none()
    if data is None or b"$railyard." not in data:
        return data
    reference = {payloads.MARKER: digest, "bytes": len(data)}
    (value,) = await payloads.resolve_values(session, [reference])
    return msgspec.json.encode(value)


async def full_value(session: AsyncSession, value: Any) -> Any:
    """``value`` as read from a run column, with its large parts put back whole (for a
    webhook answering with the run's output)."""
    (resolved,) = await payloads.resolve_values(session, [value])
    return resolved
