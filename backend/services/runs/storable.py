"""Text PostgreSQL cannot store, found before it reaches the database.

What cannot be stored (U+0000, a lone surrogate) and the walker that finds it live in
:mod:`backend.engine.unstorable` (pure, shared with the engine). Railyard's rule is to
refuse such input with HTTP 400 naming where it is (docs/webhooks.md, "Characters that
cannot be stored"), never to change it silently.

:func:`find_unstorable` walks a decoded value (strings, lists, dicts with string keys,
in keys as well as values) and names the first offending place as a path such as
``body.items[2].name``.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from backend.engine.unstorable import (
    Unstorable,
    find_unstorable,
    member,
    replace_unstorable,
    unstorable_character,
)
from backend.services.availability import causes

_DATABASE_REFUSALS = (
    asyncpg.exceptions.UntranslatableCharacterError,
    asyncpg.exceptions.CharacterNotInRepertoireError,
)


class UnstorableInput(ValueError):
    """Raised for input holding text PostgreSQL cannot store; ``found`` says where."""

    def __init__(self, found: Unstorable) -> None:
        super().__init__(found.message)
        self.found = found
        self.field = found.field


UNSTORABLE_RUN_ERROR = {
    "message": "the run cannot go on: PostgreSQL refused to store a value it computed"
    " (U+0000 or a lone surrogate, which cannot be stored)",
    "kind": "unstorable_value",
}
"""The run error of a run whose next state the database refused (:func:`refused_by_database`):
a worker's job or an eager run fails the run with it instead of retrying."""


def refused_by_database(exc: BaseException) -> bool:
    """True when ``exc`` (or an error in its chain) is the database or its driver refusing
    unstorable text: PostgreSQL's ``untranslatable_character`` (22P05, a ``\\u0000`` in
    jsonb) or ``character_not_in_repertoire`` (22021, a NUL in text), or the
    ``UnicodeEncodeError`` of a lone surrogate. The backstop behind the request check."""
    for error in causes(exc):
        if isinstance(error, _DATABASE_REFUSALS):
            return True
        if isinstance(error, UnicodeEncodeError) and "surrogate" in str(error):
            return True
    return False


def check_storable(value: Any, path: str) -> None:
    """Raise :class:`UnstorableInput` when ``value`` holds an unstorable character."""
    found = find_unstorable(value, path)
    if found is not None:
        raise UnstorableInput(found)


__all__ = [
    "Unstorable",
    "UnstorableInput",
    "check_storable",
    "find_unstorable",
    "member",
    "refused_by_database",
    "replace_unstorable",
    "unstorable_character",
]
