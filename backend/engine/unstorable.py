"""Text PostgreSQL cannot store: finding it in a value and naming where it is.

PostgreSQL's ``text`` and ``jsonb`` cannot hold U+0000 (NUL): ``text`` has no way to store
it, and ``jsonb`` refuses the ``\\u0000`` escape ("unsupported Unicode escape sequence").
Neither can hold a lone UTF-16 surrogate (U+D800..U+DFFF not in a pair): it has no UTF-8
encoding, so the driver cannot even send it.

Pure (no database import), so the engine checks the values expressions compute with the
same rule the API applies to input (:mod:`backend.services.runs.storable`).
:func:`find_unstorable` walks a decoded value (strings, lists, dicts with string keys,
in keys as well as values) and names the first offending place as a path such as
``body.items[2].name``; :func:`storable_problem` does the same behind a fast path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import msgspec

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

    @property
    def value_message(self) -> str:
        """A sentence for a step error about a computed value: ``the value contains U+0000
        (NUL), which cannot be stored`` (the field is named beside it)."""
        what = "NUL" if self.character == "U+0000" else "a lone surrogate"
        where = "a key of the value" if self.in_key else "the value"
        return f"{where} contains {self.character} ({what}), which cannot be stored"


def unstorable_character(text: str) -> str | None:
    """``"U+0000"``-style name of the first unstorable character of ``text``, or None."""
    match = _UNSTORABLE.search(text)
    return None if match is None else f"U+{ord(match.group()):04X}"


def replace_unstorable(text: str) -> str:
    """``text`` with every unstorable character replaced by U+FFFD (for diagnostic text,
    such as error messages, where a lossy rule is fine)."""
    return _UNSTORABLE.sub("\ufffd", text)


def replace_unstorable_in(value: Any) -> Any:
    """``value`` (str, list, tuple, dict, scalar) with :func:`replace_unstorable` applied to
    every string in it, keys included; lists and tuples become lists."""
    if isinstance(value, str):
        return replace_unstorable(value)
    if isinstance(value, dict):
        return {replace_unstorable_in(k): replace_unstorable_in(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [replace_unstorable_in(v) for v in value]
    return value


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


def storable_problem(value: Any, path: str) -> Unstorable | None:
    """Like :func:`find_unstorable`, but first encodes ``value`` as JSON (msgspec, fast)
    and walks it only when the encoding shows a NUL or fails on a lone surrogate."""
    try:
        encoded = msgspec.json.encode(value)
    except (TypeError, ValueError, UnicodeEncodeError):  # surrogates, or not JSON-able
        return find_unstorable(value, path)
    if b"\\u0000" not in encoded:
        return None
    return find_unstorable(value, path)
