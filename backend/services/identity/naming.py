"""Names of administrative objects (groups, projects, service accounts)."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession


class InvalidName(ValueError):
    """An empty, over-long or already taken name (``field`` is ``"name"``)."""

    field = "name"


def clean_name(name: str, limit: int = 200) -> str:
    """``name`` stripped; raises :class:`InvalidName` when empty or longer than ``limit``."""
    name = (name or "").strip()
    if not name:
        raise InvalidName("a name is required")
    if len(name) > limit:
        raise InvalidName(f"the name is longer than {limit} characters")
    return name


class NameTaken(InvalidName):
    """The name is already used by another object of the same kind (answered 409)."""


async def add_unique(session: AsyncSession, row: object, taken: str) -> None:
    """Insert ``row`` in a savepoint; raises :class:`NameTaken` (``taken``) when a unique
    constraint refuses it, leaving the caller's transaction usable."""
    try:
        async with session.begin_nested():
            session.add(row)
            await session.flush()
    except IntegrityError:
        raise NameTaken(taken) from None
