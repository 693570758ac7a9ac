"""Cursor pagination of every collection (docs/api.md, "Lists"): one page of items in a
stable order, and an opaque cursor naming where the next page starts.

A cursor is the sort key of a page's last item (keyset pagination, as Stripe's
``starting_after`` and GitHub's ``after``), with the name of the collection that made it:
``base64url(JSON array [collection, *key values])``, decoded back to the key's declared
types, so a page stays right whatever was inserted or deleted before it, and costs an
index range scan instead of an ``OFFSET`` walk. Callers treat cursors as opaque; a cursor
another collection made, or one that does not decode to the collection's key type, is a
:class:`BadCursor` (400 naming ``cursor``).

- :func:`page_query` pages a SQLAlchemy select by its ordering columns, all descending
  (newest first) with a unique last column (``(created_at, id)``): one query of
  ``limit + 1`` rows, the extra row only telling whether there is more;
- :func:`page_items` pages a list already in memory (the small administrative collections:
  groups, grants, settings, ...) by a key function, ascending or descending.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
from sqlalchemy import Select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.elements import ColumnElement

T = TypeVar("T")

DEFAULT_LIMIT = 100
"""Items on a page when the request names no ``limit``."""

MAX_LIMIT = 1000
"""Most items one page holds (a larger ``limit`` is a 400, never a clamp)."""


class BadCursor(ValueError):
    """A ``cursor`` that is not one this collection handed out (400 naming ``cursor``)."""

    field = "cursor"


@dataclass(frozen=True)
class Slice(Generic[T]):
    """One page: its ``items`` and the cursor of the next page (``None`` on the last)."""

    items: list[T]
    next_cursor: str | None

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


def encode_cursor(key: Sequence[Any], collection: str) -> str:
    """The opaque cursor of sort key ``key`` in ``collection`` (a name unique to the list,
    e.g. ``"runs"``; UUIDs and datetimes as their JSON strings)."""
    raw = msgspec.json.encode([collection, *key])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(cursor: str, key_type: Any, collection: str) -> Any:
    """The sort key a cursor :func:`encode_cursor` made for ``collection`` holds, as
    ``key_type`` (a ``tuple[...]`` type). Raises :class:`BadCursor` for anything else,
    a cursor of another collection included."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        made_by, *key = msgspec.json.decode(raw, type=list)
        if made_by != collection:
            raise ValueError(made_by)
        return msgspec.convert(key, type=key_type, strict=False)
    except (binascii.Error, ValueError, TypeError, msgspec.DecodeError, msgspec.ValidationError):
        raise BadCursor(f"cursor {cursor[:40]!r} is not a cursor of this list") from None


async def page_query(
    session: AsyncSession,
    stmt: Select[Any, Any] | Select[Any],
    order: Sequence[ColumnElement[Any] | InstrumentedAttribute[Any]],
    key_type: Any,
    key_of: Callable[[Any], Sequence[Any]],
    *,
    collection: str,
    cursor: str | None,
    limit: int,
) -> Slice[Any]:
    """One page of ``stmt``'s rows, newest first: ordered by ``order`` (each descending;
    the last column unique, e.g. ``(Run.created_at, Run.id)``), starting after the row
    ``cursor`` names. ``key_of(row)`` is a row's sort key (the values of ``order``),
    ``key_type`` its type for decoding (``tuple[datetime, uuid.UUID]``), ``collection``
    the list's name in its cursors. Raises :class:`BadCursor`."""
    if cursor is not None:
        key = decode_cursor(cursor, key_type, collection)
        stmt = stmt.where(tuple_(*order) < tuple_(*key))
    stmt = stmt.order_by(*(column.desc() for column in order)).limit(limit + 1)
    rows = list((await session.execute(stmt)).all())
    return _cut(rows, limit, key_of, collection)


def page_items(
    items: Sequence[T],
    key: Callable[[T], Sequence[Any]],
    key_type: Any,
    *,
    collection: str,
    cursor: str | None,
    limit: int,
    descending: bool = False,
) -> Slice[T]:
    """One page of ``items`` (in any order) sorted by ``key`` (unique per item), starting
    after the item ``cursor`` names; ``collection`` is the list's name in its cursors.
    Raises :class:`BadCursor`."""
    ordered = sorted(items, key=lambda item: tuple(key(item)), reverse=descending)
    if cursor is not None:
        after = tuple(decode_cursor(cursor, key_type, collection))
        try:
            ordered = [
                item
                for item in ordered
                if (tuple(key(item)) < after if descending else tuple(key(item)) > after)
            ]
        except TypeError:  # a key of other types than this collection's
            raise BadCursor(f"cursor {cursor[:40]!r} is not a cursor of this list") from None
    return _cut(ordered[: limit + 1], limit, key, collection)


def _cut(
    rows: list[T], limit: int, key_of: Callable[[T], Sequence[Any]], collection: str
) -> Slice[T]:
    """The first ``limit`` of ``rows`` (at most ``limit + 1``), with the next cursor when
    there were more."""
    if len(rows) <= limit:
        return Slice(rows, None)
    page = rows[:limit]
    return Slice(page, encode_cursor(key_of(page[-1]), collection))
