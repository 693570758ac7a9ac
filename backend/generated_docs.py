"""Parts of the Markdown documentation that are generated from the code: the text between
a ``begin`` and an ``end`` marker line (HTML comments), rewritten by a ``railyard``
command's ``--update FILE`` and compared by a test (the settings table of
docs/operations.md, the node-type reference docs/node-types.md)."""

from __future__ import annotations

from pathlib import Path


def generated_part(text: str, begin: str, end: str) -> str | None:
    """The part of ``text`` from the ``begin`` marker to the ``end`` marker (both
    included), or ``None`` when either is missing."""
    start = text.find(begin)
    stop = text.find(end, start)
    if start < 0 or stop < 0:
        return None
    return text[start : stop + len(end)]


def update_generated(path: Path, begin: str, end: str, fresh: str) -> bool:
    """Replace the generated part of the Markdown file ``path`` with ``fresh`` (which
    carries the markers itself); returns whether the file changed.

    Raises :class:`ValueError` when the file has no ``begin`` ... ``end`` part, OSError
    when it cannot be read or written.
    """
    text = path.read_text(encoding="utf-8")
    current = generated_part(text, begin, end)
    if current is None:
        raise ValueError(f"{path} has no part between {begin!r} and {end!r}")
    if current == fresh:
        return False
    path.write_text(text.replace(current, fresh), encoding="utf-8")
    return True
