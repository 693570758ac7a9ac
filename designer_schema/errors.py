"""Errors raised when decoding designer documents from JSON."""

from __future__ import annotations

import re
from typing import Self

import msgspec

_AT_PATH = re.compile(r"^(?P<message>.*) - at `(?P<path>\$[^`]*)`$", re.DOTALL)


class SchemaDecodeError(ValueError):
    """JSON that is malformed or does not match a designer_schema type.

    ``message`` says what is wrong (msgspec's wording, e.g. ``Expected `str`, got `int```);
    ``path`` is a JSONPath-like location such as ``$.nodes[0].id`` (``$`` for the document
    itself, including malformed JSON).
    """

    def __init__(self, message: str, path: str = "$") -> None:
        super().__init__(f"{message} (at {path})")
        self.message = message
        self.path = path

    @classmethod
    def from_msgspec(cls, exc: msgspec.MsgspecError) -> Self:
        """Build the error from a ``msgspec.ValidationError`` or ``msgspec.DecodeError``."""
        text = str(exc)
        match = _AT_PATH.match(text)
        if match is None:
            return cls(text, "$")
        return cls(match.group("message"), match.group("path"))
