"""Large values stored once, by reference (DESIGN.md: "large values above a documented
threshold are stored once by reference").

A run's values (run input, output and error; step inputs, outputs and errors; attempt
inputs, configs, outputs and errors) are ``jsonb`` columns. Before one is written, every
part of it whose JSON text is longer than the *inline limit* (setting
``RAILYARD_PAYLOAD_INLINE_LIMIT``, default 256 KiB) is stored in the ``payloads`` table,
keyed by the SHA-256 of its JSON text, and replaced in the column by a reference::

    {"$railyard.payload": "<sha256 hex>", "bytes": <length of the JSON text>}

Parts are chosen bottom-up: a large object or list first has its large members replaced,
and is stored itself only if it is still over the limit, so a 5 MB list inside a webhook
body becomes one payload however many steps pass it on (the same content is the same row:
``INSERT ... ON CONFLICT DO NOTHING``). Reading a run for the engine
(:func:`resolve_values`) puts the values back, so steps always get the full value; the API
and pages show a preview instead (backend/services/run_values.py).

An object of the run's own data that has the key ``$railyard.payload`` is always stored by
reference, so a reference in a column is never user data. Payload rows are immutable and,
like runs, never deleted.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec
from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from backend.db.fast_path import LazyConnection
from backend.db.models import Payload

log = logging.getLogger(__name__)

MARKER = "$railyard.payload"
_MARKER_BYTES = MARKER.encode()
DEFAULT_INLINE_LIMIT = 256 * 1024
#: Characters of a payload's JSON text kept as its preview.
PREVIEW_CHARS = 1000
#: Nesting depth below which large parts are not looked for (the part is stored whole).
_MAX_DEPTH = 32

_inline_limit = DEFAULT_INLINE_LIMIT
_encode = msgspec.json.encode

Db = AsyncSession | AsyncConnection | LazyConnection


def configure(inline_limit: int) -> None:
    """Set the process's inline limit in bytes of JSON text (from settings; >= 1024)."""
    global _inline_limit
    _inline_limit = max(int(inline_limit), 1024)


def inline_limit() -> int:
    """The inline limit in force, in bytes of JSON text."""
    return _inline_limit


def reference_of(value: Any) -> str | None:
    """The SHA-256 a reference points to, or ``None`` when ``value`` is no reference."""
    if isinstance(value, dict):
        ref = value.get(MARKER)
        if isinstance(ref, str):
            return ref
    return None


@dataclass(frozen=True)
class StoredPayload:
    """A payload row to insert: ``data`` is the JSON text, ``sha256`` its hex digest."""

    sha256: str
    data: bytes
    summary: str
    preview: str


def summary_of(value: Any) -> str:
    """A few words on a value's shape: "list of 3 items", "object with 2 keys", ..."""
    if isinstance(value, list):
        return f"list of {len(value)} items"
    if isinstance(value, dict):
        return f"object with {len(value)} keys"
    if isinstance(value, str):
        return f"text of {len(value)} characters"
    return type(value).__name__


def preview_of(data: bytes) -> str:
    """The first :data:`PREVIEW_CHARS` characters of JSON text ``data`` ("…" when cut)."""
    head = data[: PREVIEW_CHARS * 4].decode("utf-8", errors="ignore")
    return head if len(data) <= PREVIEW_CHARS else head[:PREVIEW_CHARS] + "…"


class Externalizer:
    """Replaces the large parts of values by references, collecting the payloads
    (``payloads``, by SHA-256) that must be stored before the values are written."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit or _inline_limit
        self.payloads: dict[str, StoredPayload] = {}

    def value(self, value: Any) -> Any:
        """``value`` as a column stores it (the same object when nothing is large)."""
        if value is None or isinstance(value, bool | int | float):
            return value
        return self._part(value, _encode(value))

    def rows(self, rows: list[dict[str, Any]], fields: Iterable[str]) -> list[dict[str, Any]]:
        """Apply :meth:`value` to ``fields`` of each row, in place; one encoding of all rows
        decides when there is nothing to do (the usual case)."""
        encoded = _encode(rows)
        if len(encoded) <= self.limit and _MARKER_BYTES not in encoded:
            return rows
        for row in rows:
            for name in fields:
                row[name] = self.value(row.get(name))
        return rows

    def _part(self, value: Any, encoded: bytes, depth: int = 0) -> Any:
        small = len(encoded) <= self.limit
        if small and _MARKER_BYTES not in encoded:
            return value
        if depth >= _MAX_DEPTH and isinstance(value, dict | list):
            return self._store(value, encoded)  # bounded work for deeply nested values
        if isinstance(value, dict):
            if MARKER in value:  # never stored inline: it would read as a reference
                return self._store(value, encoded)
            reduced: Any = {k: self._part(v, _encode(v), depth + 1) for k, v in value.items()}
            changed = any(reduced[k] is not v for k, v in value.items())
        elif isinstance(value, list):
            reduced = [self._part(v, _encode(v), depth + 1) for v in value]
            changed = any(r is not v for r, v in zip(reduced, value, strict=True))
        else:
            return value if small else self._store(value, encoded)
        if not changed:
            return value if small else self._store(value, encoded)
        encoded = _encode(reduced)
        return reduced if len(encoded) <= self.limit else self._store(reduced, encoded)

    def _store(self, value: Any, encoded: bytes) -> dict[str, Any]:
        digest = hashlib.sha256(encoded).hexdigest()
        if digest not in self.payloads:
            self.payloads[digest] = StoredPayload(
                digest, encoded, summary_of(value), preview_of(encoded)
            )
        return {MARKER: digest, "bytes": len(encoded)}


async def store(db: Db, payloads: dict[str, StoredPayload]) -> None:
    """Insert the payloads not stored yet (the stored ones are found first, so a value
    already stored is not sent again, and their ``last_used_at`` is set to now: retention
    removes a payload only when no kept run can reference it, see
    backend/services/retention.py). Call it in the transaction (or autocommit connection)
    that then writes the references."""
    if not payloads:
        return
    present = set(
        (
            await db.execute(
                update(Payload)
                .where(Payload.sha256.in_(list(payloads)))
                .values(last_used_at=func.now())
                .returning(Payload.sha256)
            )
        ).scalars()
    )
    missing = [p for digest, p in payloads.items() if digest not in present]
    for p in missing:
        await db.execute(
            insert(Payload)
            .values(
                sha256=p.sha256,
                size_bytes=len(p.data),
                summary=p.summary,
                preview=p.preview,
                data=p.data,
            )
            .on_conflict_do_nothing(index_elements=["sha256"])
        )


async def store_value(db: Db, value: Any) -> Any:
    """Externalize ``value`` and store its payloads; returns what the column holds."""
    ext = Externalizer()
    stored = ext.value(value)
    await store(db, ext.payloads)
    return stored


def references(value: Any, found: set[str]) -> set[str]:
    """Add the SHA-256 of every reference inside ``value`` to ``found``; returns it.
    (Iterative: JSON nested as deep as a decoder allows is fine.)"""
    stack = [value]
    while stack:
        v = stack.pop()
        ref = reference_of(v)
        if ref is not None:
            found.add(ref)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


def substitute(value: Any, table: dict[str, Any]) -> Any:
    """``value`` with each reference whose SHA-256 is in ``table`` replaced by
    ``table[sha256]`` (containers changed in place; unknown references kept; the
    replacements themselves are not searched)."""
    ref = reference_of(value)
    if ref is not None:
        return table.get(ref, value)
    stack = [value]
    while stack:
        v = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for key, item in items:
            ref = reference_of(item)
            if ref is not None:
                if ref in table:
                    v[key] = table[ref]
            elif isinstance(item, dict | list):
                stack.append(item)
    return value


async def resolve_values(db: Db, values: list[Any]) -> list[Any]:
    """``values`` with every reference replaced by its full value (read from
    ``payloads``, nested references included). A reference to a missing payload is left
    as it is and logged (it cannot happen while payload rows are never deleted)."""
    wanted: set[str] = set()
    for value in values:
        references(value, wanted)
    if not wanted:
        return values
    table: dict[str, Any] = {}
    while wanted:
        rows = await db.execute(
            select(Payload.sha256, Payload.data).where(Payload.sha256.in_(list(wanted)))
        )
        loaded = {digest: msgspec.json.decode(data) for digest, data in rows}
        for digest in wanted - loaded.keys():
            log.error("payload %s is missing; its reference is kept", digest)
        table.update(loaded)
        wanted = set()
        for v in loaded.values():
            references(v, wanted)
        wanted -= table.keys()
    for digest, v in table.items():  # nested references first, then the values
        table[digest] = substitute(v, table)
    return [substitute(value, table) for value in values]
