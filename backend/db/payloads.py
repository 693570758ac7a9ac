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
and pages show a preview instead (backend/services/runs/run_values.py).

**References are the engine's own typed wrapper, never user data.** A reference is an
object with exactly the keys ``$railyard.payload`` (64 lowercase hex digits) and ``bytes``
(:func:`reference_of`); only those are followed. An object of the run's own data that has
a reserved key (``$railyard.payload`` or ``$railyard.literal``), at any depth, is stored
*escaped*: wrapped as ``{"$railyard.literal": <the object>}`` inside a payload stored by
reference, so a column and the payloads the engine reduced hold no reference-shaped user
object; the wrappers are taken off when values are read back (:func:`resolve_values`). A
body that names someone else's large value, as text or in a forged wrapper, is data, never
a way to it (docs/security.md, "Large values"). A payload whose whole value is shaped like
a reference (user data stored before escaping existed) is read as data too. Payload rows
are immutable and, like runs, never deleted.
"""

from __future__ import annotations

import hashlib
import logging
import re
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
ESCAPE = "$railyard.literal"
"""Key of the wrapper around a user object that has a reserved key (module docstring)."""
_ESCAPE_BYTES = ESCAPE.encode()
_RESERVED = (MARKER, ESCAPE)
_RESERVED_BYTES = b"$railyard."
_DIGEST = re.compile(r"[0-9a-f]{64}")
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
    """The SHA-256 a reference points to, or ``None`` when ``value`` is no reference: a
    reference is exactly ``{"$railyard.payload": <64 hex digits>, "bytes": <int>}``."""
    if isinstance(value, dict) and len(value) == 2:
        ref = value.get(MARKER)
        if isinstance(ref, str) and isinstance(value.get("bytes"), int) and _DIGEST.fullmatch(ref):
            return ref
    return None


class Unresolved(dict[str, Any]):
    """A reference the run state holds unread on purpose, where the workflow cannot see
    it (backend/db/unread_input.py): :func:`resolve_values` and :func:`references` pass
    it by, the :class:`Externalizer` writes it as it is (its JSON is the reference's)."""

    __slots__ = ()


def _flat(encoded: bytes) -> bool:
    """Whether the JSON text of a list holds no object, nested list or string (numbers,
    booleans and nulls only): three scans in C instead of a walk in Python."""
    return encoded.find(b"[", 1) < 0 and b"{" not in encoded and b'"' not in encoded


def _is_escape(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and ESCAPE in value


def escaped(value: Any) -> Any:
    """A copy of ``value`` in which every object with a reserved key (``$railyard.payload``,
    ``$railyard.literal``), at any depth, is wrapped as ``{"$railyard.literal": obj}``.
    Iterative: any depth a decoder allows."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, dict):
            copy = dict(item)
            container[key] = {ESCAPE: copy} if any(k in copy for k in _RESERVED) else copy
            stack.extend((copy, k) for k in copy)
        elif isinstance(item, list):
            copy_list = list(item)
            container[key] = copy_list
            stack.extend((copy_list, i) for i in range(len(copy_list)))
    return root[0]


def unescaped(value: Any) -> Any:
    """``value`` with the wrappers :func:`escaped` put in taken off (in place where
    ``value`` is a container; the result is returned). Each wrapper is taken off once,
    however often a shared part is met."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    seen: set[int] = set()
    while stack:
        container, key = stack.pop()
        item = container[key]
        if _is_escape(item):
            item = container[key] = item[ESCAPE]  # the user's own object: literal at its top
        if not isinstance(item, dict | list) or id(item) in seen:
            continue
        seen.add(id(item))
        stack.extend((item, k) for k in (item if isinstance(item, dict) else range(len(item))))
    return root[0]


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


Known = dict[int, tuple[Any, str]]
"""Containers that are (or were read from) a stored payload, by identity: ``id(value)
-> (value, sha256)`` (the value is kept, so its id is not reused)."""

SHARED_MIN_BYTES = 1024
"""A part shared by many runs (``NewRun.by_reference``) is stored by reference from this
length of JSON text on (smaller, the reference would save little)."""


class Externalizer:
    """Replaces the large parts of values by references, collecting the payloads
    (``payloads``, by SHA-256) that must be stored before the values are written.

    ``known`` containers (read from payloads: :func:`resolve_values` collects them) are
    written back as their reference wherever they appear, whatever their size, as long
    as their content is still that payload's (checked by its SHA-256, so a value changed
    in place is never written as its old reference); ``shared`` containers (a parent's
    input passed to each of its children) are stored by reference from
    :data:`SHARED_MIN_BYTES` on. So a value read by reference and passed on unchanged
    stays one payload, however many runs and steps hold it."""

    def __init__(
        self, limit: int | None = None, *, known: Known | None = None, shared: Any = ()
    ) -> None:
        self.limit = limit or _inline_limit
        self.payloads: dict[str, StoredPayload] = {}
        # containers already made into what a column stores, by identity (the value is
        # kept, so its id is not reused): a run's input is also its trigger step's output
        self._done: dict[int, tuple[Any, Any]] = {}
        self._known: Known = dict(known or {})
        self._refs: dict[int, Any] = {}  # id -> the reference of a known container checked
        self._digests = {digest for _, digest in self._known.values()}
        for part in shared:
            if isinstance(part, dict | list) and id(part) not in self._known:
                encoded = _encode(part)
                if len(encoded) >= SHARED_MIN_BYTES and _RESERVED_BYTES not in encoded:
                    self._refs[id(part)] = self._store(part, encoded)
                    self._known[id(part)] = (part, self._refs[id(part)][MARKER])
                    self._digests.add(self._refs[id(part)][MARKER])

    def value(self, value: Any) -> Any:
        """``value`` as a column stores it (the same object when nothing is large). The
        same container given again (not a copy) is not encoded again."""
        if value is None or isinstance(value, bool | int | float) or type(value) is Unresolved:
            return value
        done = self._done.get(id(value))
        if done is not None and done[0] is value:
            return done[1]
        if self._known:
            swapped = self._swap(value, 0)
            if swapped is not value:
                encoded = _encode(swapped)
                stored = swapped if len(encoded) <= self.limit else self._store(swapped, encoded)
                if isinstance(value, dict | list):
                    self._done[id(value)] = (value, stored)
                return stored
        stored = self._part(value, _encode(value))
        if isinstance(value, dict | list):
            self._done[id(value)] = (value, stored)
        return stored

    def rows(self, rows: list[dict[str, Any]], fields: Iterable[str]) -> list[dict[str, Any]]:
        """Apply :meth:`value` to ``fields`` of each row, in place; one encoding of all rows
        decides when there is nothing to do (the usual case), unless a field holds a
        value already made or known containers may be in them (then each field is done,
        that one from memory)."""
        fields = tuple(fields)
        known = bool(self._known) or any(
            id(row.get(name)) in self._done for row in rows for name in fields
        )
        encoded = b"" if known else _encode(rows)
        if not known and len(encoded) <= self.limit and _RESERVED_BYTES not in encoded:
            return rows
        for row in rows:
            for name in fields:
                row[name] = self.value(row.get(name))
        return rows

    def _part(self, value: Any, encoded: bytes, depth: int = 0) -> Any:
        if type(value) is Unresolved:
            return value
        small = len(encoded) <= self.limit
        if small and _RESERVED_BYTES not in encoded:
            return value
        if depth >= _MAX_DEPTH and isinstance(value, dict | list):
            # bounded work for deeply nested values: stored whole, reserved keys escaped
            if _RESERVED_BYTES in encoded:
                return self._store_escaped(value)
            return self._store(value, encoded)
        if isinstance(value, dict):
            if any(k in value for k in _RESERVED):  # user data shaped like ours: escaped
                return self._store_escaped(value)
            reduced: Any = {k: self._member(v, depth) for k, v in value.items()}
            changed = any(reduced[k] is not v for k, v in value.items())
        elif isinstance(value, list):
            if _flat(encoded):  # numbers, booleans, nulls only: no member is a part
                return self._store(value, encoded)
            reduced = [self._member(v, depth) for v in value]
            changed = any(r is not v for r, v in zip(reduced, value, strict=True))
        else:
            return value if small else self._store(value, encoded)
        if not changed:
            return value if small else self._store(value, encoded)
        encoded = _encode(reduced)
        return reduced if len(encoded) <= self.limit else self._store(reduced, encoded)

    def _reference(self, value: Any) -> Any:
        """The reference of known container ``value`` when its content is still its
        payload's, else ``None``."""
        entry = self._known.get(id(value))
        if entry is None or entry[0] is not value:
            return None
        if id(value) not in self._refs:
            encoded = _encode(value)
            same = hashlib.sha256(encoded).hexdigest() == entry[1]
            self._refs[id(value)] = {MARKER: entry[1], "bytes": len(encoded)} if same else None
        return self._refs[id(value)]

    def _copy_of_known(self, value: Any) -> Any:
        """The reference of the known payload whose JSON text ``value``, a container of
        :data:`SHARED_MIN_BYTES` or more, has (``None``: none): a copy of a value read by
        reference (a For-each's items, decoded from its expression) is stored as the
        same payload. Looked for in the members of a written value only (a child's whole
        input is not encoded for it); text with a reserved key never matches (a forged
        reference stays data)."""
        if not self._digests or not isinstance(value, dict | list):
            return None
        encoded = _encode(value)
        if len(encoded) < SHARED_MIN_BYTES or _RESERVED_BYTES in encoded:
            return None
        digest = hashlib.sha256(encoded).hexdigest()
        return {MARKER: digest, "bytes": len(encoded)} if digest in self._digests else None

    def _swap(self, value: Any, depth: int) -> Any:
        """``value`` with its known containers replaced by their references (a new
        container where one was replaced, else ``value`` itself) and its large other
        parts as :meth:`_part` makes them; an object of the run's own data with a
        reserved key is stored escaped, as :meth:`_part` does."""
        if type(value) is Unresolved:
            return value
        ref = self._reference(value) or (self._copy_of_known(value) if depth == 1 else None)
        if ref is not None:
            return ref
        if depth >= _MAX_DEPTH or not isinstance(value, dict | list):
            return value if depth == 0 else self._member(value, depth - 1)
        if isinstance(value, dict):
            if any(k in value for k in _RESERVED):
                return self._store_escaped(value)
            reduced: Any = {k: self._swap(v, depth + 1) for k, v in value.items()}
            changed = any(reduced[k] is not v for k, v in value.items())
        else:
            reduced = [self._swap(v, depth + 1) for v in value]
            changed = any(r is not v for r, v in zip(reduced, value, strict=True))
        return reduced if changed else value

    def _member(self, value: Any, depth: int) -> Any:
        """A member of a container, as :meth:`_part` makes it; a number, boolean, null or
        a string too short to be over the limit (JSON text at most 6 bytes a character,
        plus quotes) is never a part and is not encoded to find out: a 1 MB list of
        numbers costs one pass, not one encoding per item."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str) and len(value) * 6 + 2 <= self.limit:
            return value
        return self._part(value, _encode(value), depth + 1)

    def _store_escaped(self, value: Any) -> dict[str, Any]:
        """Store :func:`escaped` ``value`` whole (summary of the value itself)."""
        wrapped = escaped(value)
        return self._store(wrapped, _encode(wrapped), summary=summary_of(value))

    def _store(self, value: Any, encoded: bytes, summary: str | None = None) -> dict[str, Any]:
        digest = hashlib.sha256(encoded).hexdigest()
        if digest not in self.payloads:
            self.payloads[digest] = StoredPayload(
                digest, encoded, summary or summary_of(value), preview_of(encoded)
            )
        return {MARKER: digest, "bytes": len(encoded)}


async def store(db: Db, payloads: dict[str, StoredPayload]) -> None:
    """Insert the payloads not stored yet (the stored ones are found first, so a value
    already stored is not sent again, and their ``last_used_at`` is set to now: retention
    removes a payload only when no kept run can reference it, see
    backend/services/operations/retention.py). Call it in the transaction (or autocommit connection)
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
    """Add the SHA-256 of every reference inside ``value`` to ``found``; returns it. The
    inside of an escaped user object is data and is not looked into. (Iterative: JSON
    nested as deep as a decoder allows is fine.)"""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is Unresolved:
            continue
        ref = reference_of(v)
        if ref is not None:
            found.add(ref)
        elif isinstance(v, dict) and not _is_escape(v):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


def substitute(value: Any, table: dict[str, Any]) -> Any:
    """``value`` with each reference whose SHA-256 is in ``table`` replaced by
    ``table[sha256]`` (containers changed in place; unknown references kept; the
    replacements themselves are not searched)."""
    ref = None if type(value) is Unresolved else reference_of(value)
    if ref is not None:
        return table.get(ref, value)
    stack = [value]
    while stack:
        v = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for key, item in items:
            if type(item) is Unresolved:
                continue
            ref = reference_of(item)
            if ref is not None:
                if ref in table:
                    v[key] = table[ref]
            elif isinstance(item, dict | list) and not _is_escape(item):
                stack.append(item)
    return value


async def resolve_values(db: Db, values: list[Any], known: Known | None = None) -> list[Any]:
    """``values`` with every reference replaced by its full value (read from
    ``payloads``, nested references included). A reference to a missing payload is left
    as it is and logged (it cannot happen while payload rows are never deleted). Each
    container read from a payload is added to ``known`` (see :class:`Externalizer`): one
    object per payload, wherever it is referenced."""
    wanted: set[str] = set()
    for value in values:
        # a container's text tells in C whether walking it can find a reference
        if not isinstance(value, dict | list) or _MARKER_BYTES in _encode(value):
            references(value, wanted)
    if not wanted:
        return values
    table: dict[str, Any] = {}
    nesting: set[str] = set()  # payloads whose text holds the marker: may nest references
    escapes = False
    while wanted:
        rows = await db.execute(
            select(Payload.sha256, Payload.data).where(Payload.sha256.in_(list(wanted)))
        )
        loaded = {}
        for digest, data in rows:
            value = msgspec.json.decode(data)
            if reference_of(value) is not None:  # a forged reference stored whole: data
                value = {ESCAPE: value}
            loaded[digest] = value
            escapes = escapes or _ESCAPE_BYTES in data or ESCAPE in loaded[digest]
            if _MARKER_BYTES in data:
                nesting.add(digest)
        for digest in wanted - loaded.keys():
            log.error("payload %s is missing; its reference is kept", digest)
        table.update(loaded)
        wanted = set()
        for digest, v in loaded.items():  # a payload without the marker is not walked
            if digest in nesting:
                references(v, wanted)
        wanted -= table.keys()
    for digest, v in table.items():  # nested references first, then the values
        if digest in nesting:
            table[digest] = substitute(v, table)
        if known is not None and isinstance(table[digest], dict | list):
            known[id(table[digest])] = (table[digest], digest)
    resolved = [substitute(value, table) for value in values]
    return [unescaped(value) for value in resolved] if escapes else resolved
