"""Text PostgreSQL cannot store, found before it reaches the database.

PostgreSQL's ``text`` and ``jsonb`` cannot hold U+0000 (NUL): ``text`` has no way to store
it, and ``jsonb`` refuses the ``\\u0000`` escape ("unsupported Unicode escape sequence").
Neither can hold a lone UTF-16 surrogate (U+D800..U+DFFF not in a pair): it has no UTF-8
encoding, so the driver cannot even send it. Railyard's rule is to refuse such input with
HTTP 400 naming where it is (docs/webhooks.md, "Characters that cannot be stored"), never
to change it silently.

:func:`find_unstorable` walks a decoded value (strings, lists, dicts with string keys,
in keys as well as values) and names the first offending place as a path such as
``body.items[2].name``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import asyncpg

from backend.services.availability import causes

_DATABASE_REFUSALS = (
    asyncpg.exceptions.UntranslatableCharacterError,
    asyncpg.exceptions.CharacterNotInRepertoireError,
)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Unstorable:
    """Where (``field``, e.g. ``body.items[2].name``) and what (``character``, e.g.
    ``U+0000``) was found; ``in_key`` when it sits in an object key under ``field``."""

    field: str
    character: str
    in_key: bool = False

    @property
    def message(self) -> str:
        """A sentence for the error body."""
        what = "NUL" if self.character == "U+0000" else "a lone surrogate"
        where = f"a key of {self.field}" if self.in_key else self.field
        return (
            f"{where} contains {self.character} ({what}), which cannot be stored:"
            " remove the character (or send binary data base64-encoded)"
        )


class UnstorableInput(ValueError):
    """Raised for input holding text PostgreSQL cannot store; ``found`` says where."""

    def __init__(self, found: Unstorable) -> None:
        super().__init__(found.message)
        self.found = found
        self.field = found.field


def unstorable_character(text: str) -> str | None:
    """``"U+0000"``-style name of the first unstorable character of ``text``, or None."""
    match = _UNSTORABLE.search(text)
    return None if match is None else f"U+{ord(match.group()):04X}"


def replace_unstorable(text: str) -> str:
    """``text`` with every unstorable character replaced by U+FFFD (for diagnostic text,
    such as error messages, where a lossy rule is fine)."""
    return _UNSTORABLE.sub("\ufffd", text)


def member(path: str, key: str | int) -> str:
    """``path`` extended by an object key (``.name`` or ``["a b"]``) or list index."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def find_unstorable(value: Any, path: str) -> Unstorable | None:
    """The first unstorable character in ``value`` (depth first), or None.

    ``value``: what a JSON, form or query decoder returns (str, int, float, bool, None,
    list, tuple, dict); other types are not looked into. Iterative, so any nesting depth
    is fine.
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, str):
            character = unstorable_character(current)
            if character is not None:
                return Unstorable(where, character)
        elif isinstance(current, dict):
            children = []
            for key, item in current.items():
                if isinstance(key, str):
                    character = unstorable_character(key)
                    if character is not None:
                        return Unstorable(where, character, in_key=True)
                children.append((item, member(where, key)))
            stack.extend(reversed(children))
        elif isinstance(current, list | tuple):
            stack.extend(reversed([(item, member(where, i)) for i, item in enumerate(current)]))
    return None


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
