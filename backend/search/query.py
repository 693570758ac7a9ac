"""The search box's query language: a tokenizer and a recursive-descent parser (pure).

Grammar (docs/search.md, "Query syntax")::

    query   := clause*
    clause  := ["-"] (field ":" values | text)
    values  := value ("," value)*
    value   := WORD | QUOTED
    text    := WORD | QUOTED

``WORD`` is a run of characters other than space, ``"`` and ``,`` (after a field) ;
``QUOTED`` is ``"..."`` with ``\\"`` and ``\\\\`` escapes. Clauses are combined with AND,
the values of one clause with OR; ``-`` negates a clause. A word shaped like
``name:value`` whose ``name`` is made of letters but is not a known field is an error (a
typo like ``stauts:failed`` should not silently become text); quote it to search for the
text itself. ``scheme://...`` (a URL) is text.

:func:`parse` raises :class:`QuerySyntaxError` carrying the 0-based character
``position`` in the query and a message naming what is wrong and what was expected.
Field values are checked and converted by :mod:`backend.search.fields`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from enum import StrEnum

MAX_QUERY_LENGTH = 1000
MAX_CLAUSES = 32


class Scope(StrEnum):
    """What a search looks through."""

    RUNS = "runs"
    WORKFLOWS = "workflows"
    AUDIT = "audit"


class QuerySyntaxError(ValueError):
    """A query the parser refuses: ``message`` says why, ``position`` where (0-based
    character offset in the query text)."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (at character {position + 1})")
        self.message = message
        self.position = position


@dataclass(frozen=True)
class TextTerm:
    """Free text: a word, or a quoted phrase whose words must appear in order."""

    text: str
    phrase: bool
    negated: bool = False
    position: int = 0


@dataclass(frozen=True)
class FieldClause:
    """``field:value[,value...]`` (raw values, as typed; OR between them)."""

    field: str
    values: tuple[str, ...]
    negated: bool = False
    position: int = 0


@dataclass
class ParsedQuery:
    """A parsed query: free-text terms and field clauses, in the order typed."""

    text: list[TextTerm] = field(default_factory=list)
    clauses: list[FieldClause] = field(default_factory=list)

    def fields(self, name: str) -> list[FieldClause]:
        """The clauses on field ``name``."""
        return [c for c in self.clauses if c.field == name]


_FIELD_NAME = re.compile(r"[A-Za-z_]+")


class _Parser:
    def __init__(self, text: str, known_fields: frozenset[str]) -> None:
        self.text = text
        self.pos = 0
        self.known = known_fields

    def _peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _quoted(self) -> str:
        start = self.pos
        self.pos += 1  # the opening quote
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                out.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            if ch == '"':
                self.pos += 1
                return "".join(out)
            out.append(ch)
            self.pos += 1
        raise QuerySyntaxError('unterminated quote: add the closing "', start)

    def _word(self, stop: str) -> str:
        start = self.pos
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch.isspace() or ch == '"' or ch in stop:
                break
            self.pos += 1
        return self.text[start : self.pos]

    def _values(self, name: str) -> tuple[str, ...]:
        values: list[str] = []
        while True:
            at = self.pos
            ch = self._peek()
            if ch == '"':
                values.append(self._quoted())
            else:
                word = self._word(",")
                if not word:
                    raise QuerySyntaxError(
                        f'{name}: needs a value, e.g. {name}:value or {name}:"two words"',
                        at,
                    )
                values.append(word)
            if self._peek() != ",":
                return tuple(values)
            self.pos += 1

    def _clause(self, parsed: ParsedQuery) -> None:
        start = self.pos
        negated = False
        if self._peek() == "-" and self.pos + 1 < len(self.text):
            nxt = self.text[self.pos + 1]
            if not nxt.isspace():
                negated = True
                self.pos += 1
        at = self.pos
        if self._peek() == '"':
            parsed.text.append(TextTerm(self._quoted(), True, negated, start))
            return
        word = self._word(":")
        url = self.text.startswith("://", self.pos)
        if self._peek() == ":" and word and _FIELD_NAME.fullmatch(word) and not url:
            name = word.lower()
            if name not in self.known:
                close = difflib.get_close_matches(name, sorted(self.known), n=1)
                hint = f"did you mean {close[0]}:? " if close else ""
                raise QuerySyntaxError(
                    f"unknown field {word}: ({hint}known fields: {', '.join(sorted(self.known))};"
                    f' put "{word}:..." in quotes to search for the text)',
                    at,
                )
            self.pos += 1  # the colon
            parsed.clauses.append(FieldClause(name, self._values(name), negated, start))
            return
        # a word with a colon inside it that is not a field (a URL, a time): text
        rest = self._word("") if self._peek() == ":" else ""
        text = word + rest
        if not text:
            raise QuerySyntaxError(f"unexpected {self._peek()!r}", self.pos)
        parsed.text.append(TextTerm(text, False, negated, start))

    def parse(self) -> ParsedQuery:
        parsed = ParsedQuery()
        self._skip_space()
        while self.pos < len(self.text):
            self._clause(parsed)
            if len(parsed.text) + len(parsed.clauses) > MAX_CLAUSES:
                raise QuerySyntaxError(f"too many terms (at most {MAX_CLAUSES})", self.pos)
            nxt = self._peek()
            if nxt and not nxt.isspace():
                raise QuerySyntaxError(f"unexpected {nxt!r}: separate terms with a space", self.pos)
            self._skip_space()
        return parsed


def parse(text: str, known_fields: frozenset[str]) -> ParsedQuery:
    """Parse ``text`` into free-text terms and field clauses.

    ``known_fields``: the field names (lower case) the caller's scope accepts; any other
    ``letters:`` prefix is an error. Raises :class:`QuerySyntaxError` for an unterminated
    quote, a field without a value, an unknown field, a query over
    :data:`MAX_QUERY_LENGTH` characters or more than :data:`MAX_CLAUSES` terms.
    """
    if len(text) > MAX_QUERY_LENGTH:
        raise QuerySyntaxError(
            f"the query is {len(text)} characters long (at most {MAX_QUERY_LENGTH})",
            MAX_QUERY_LENGTH,
        )
    return _Parser(text, known_fields).parse()
