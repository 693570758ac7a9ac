"""Which large values a run holds (for retention and downloads): the payloads its
columns reference, directly or nested in other payloads (backend/db/payloads.py)."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import select

from backend.db.models import Payload
from backend.db.payloads import MARKER, Db, reference_of, references

_MARKER_BYTES = MARKER.encode()


def held_by(values: list[Any]) -> set[str]:
    """The SHA-256 of every large value ``values`` (a run's columns, as stored) hold
    through references, not counting nested ones (see :func:`held_through`)."""
    found: set[str] = set()
    for value in values:
        references(value, found)
    return found


async def held_through(db: Db, direct: set[str], digest: str) -> bool:
    """Whether ``digest`` is one of ``direct`` or a reference nested in one of their
    payloads (followed the way :func:`backend.db.payloads.resolve_values` follows them:
    references only, escaped user data and reference-shaped payloads not)."""
    seen: set[str] = set()
    frontier = set(direct)
    while frontier:
        if digest in frontier:
            return True
        seen |= frontier
        rows = await db.execute(select(Payload.data).where(Payload.sha256.in_(list(frontier))))
        nested: set[str] = set()
        for (data,) in rows:
            if _MARKER_BYTES not in data:
                continue
            value = msgspec.json.decode(data)
            if reference_of(value) is None:
                references(value, nested)
        frontier = nested - seen
    return False
