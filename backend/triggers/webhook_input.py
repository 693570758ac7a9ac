"""Turn an HTTP request into a webhook run input.

The run input of a webhook trigger is::

    {"method": "POST", "path": "/hooks/<token>",
     "query": {"a": "1", "tag": ["x", "y"]},      # repeated keys become lists
     "headers": {"content-type": "application/json", ...},   # names lower-cased
     "body": <parsed body>}

Bodies: JSON (``application/json`` and ``+json``) is parsed; an empty or whitespace-only
JSON body becomes ``{}``; malformed JSON is rejected (:class:`BodyError`, HTTP 400) with the
line, column and byte offset. Other content types are kept as text (decoded with the
declared charset, invalid bytes replaced) until the triggers issue adds forms and files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


class BodyError(ValueError):
    """The request body cannot be parsed; the message says why and where."""


def parse_query(items: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Query pairs to a dict; a key given more than once maps to the list of its values."""
    out: dict[str, Any] = {}
    for key, value in items:
        if key in out:
            existing = out[key]
            out[key] = [*existing, value] if isinstance(existing, list) else [existing, value]
        else:
            out[key] = value
    return out


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            return value.strip('"')
    return "utf-8"


def parse_body(content_type: str, raw: bytes) -> Any:
    """Parse ``raw`` by ``content_type`` (see the module docstring). Raises BodyError."""
    media = content_type.split(";")[0].strip().lower()
    charset = _charset(content_type)
    try:
        text = raw.decode(charset, errors="replace")
    except LookupError:
        text = raw.decode("utf-8", errors="replace")
    if (
        media == "application/json"
        or media.endswith("+json")
        or (not media and raw.strip()[:1] in (b"{", b"["))
    ):
        if not text.strip():
            return {}
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise BodyError(
                f"malformed JSON body: {exc.msg} at line {exc.lineno}, column {exc.colno} "
                f"(character {exc.pos})"
            ) from exc
    if not raw:
        return None
    return text
