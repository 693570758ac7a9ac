"""An email message (RFC 5322 bytes, MIME) as the run input of ``imap.email_received``.

Parsed with the standard library's ``email`` package (``policy.default``: headers decoded
from RFC 2047 words, bodies from their transfer encoding and charset)::

    {"headers": {"from": {"name": "Ada", "address": "ada@example.org"},
                 "to": [{"name": "", "address": "ops@example.org"}], "cc": [...],
                 "reply_to": [...], "subject": "...", "date": "2025-01-06T10:00:00Z",
                 "message_id": "<id@example.org>", "in_reply_to": "<...>",
                 "references": ["<...>"]},
     "text": "...", "html": "...",
     "attachments": [{"filename", "content_type", "size", "sha256", "content_id",
                      "disposition", "content_base64", "omitted"}]}

``text`` and ``html`` are the message's plain-text and HTML bodies (``""`` when it has
none; lines end in ``\n``). ``date`` is RFC 3339 UTC (``null`` when missing or
unparsable). An attachment larger than the trigger's per-attachment cap keeps its
metadata (size and SHA-256 of the whole content) with ``content_base64: null`` and
``omitted: true``; the content of the others is base64, and the product stores a run
input above its large-value threshold once, by reference (docs/triggers.md).
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.headerregistry import Address
from email.message import EmailMessage, Message
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any

__all__ = ["parse_message", "rfc3339"]


def rfc3339(moment: datetime | None) -> str | None:
    """``moment`` in UTC as ``YYYY-MM-DDTHH:MM:SSZ`` (a naive time counts as UTC)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _addresses(message: Message, name: str) -> list[dict[str, str]]:
    header = message.get(name)
    if header is None:
        return []
    groups = getattr(header, "addresses", None)
    if groups is not None:  # a parsed address header (policy.default)
        found: list[Address] = list(groups)
        return [{"name": a.display_name, "address": a.addr_spec} for a in found]
    return [{"name": n, "address": a} for n, a in getaddresses([str(header)]) if a]


def _text(message: Message, name: str) -> str:
    value = message.get(name)
    return " ".join(str(value).split()) if value is not None else ""


def _date(message: Message) -> str | None:
    value = message.get("date")
    if value is None:
        return None
    moment = getattr(value, "datetime", None)
    if isinstance(moment, datetime):
        return rfc3339(moment)
    try:
        return rfc3339(parsedate_to_datetime(str(value)))
    except (TypeError, ValueError, IndexError):
        return None


def _body(message: EmailMessage, subtype: str) -> str:
    """The ``text/<subtype>`` body, lines ending in ``\n`` (not the wire's CRLF)."""
    part = message.get_body(preferencelist=(subtype,))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, UnicodeError):  # an unknown or lying charset
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content.replace("\r\n", "\n") if isinstance(content, str) else ""


def _attachment(part: EmailMessage, max_bytes: int) -> dict[str, Any]:
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        content = payload
    elif part.is_multipart() or isinstance(part.get_payload(), list):
        content = part.as_bytes()  # an attached message/rfc822
    else:
        content = b""
    omitted = len(content) > max_bytes
    return {
        "filename": part.get_filename() or "",
        "content_type": part.get_content_type(),
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "content_id": _text(part, "content-id"),
        "disposition": part.get_content_disposition() or "",
        "content_base64": None if omitted else base64.b64encode(content).decode("ascii"),
        "omitted": omitted,
    }


def parse_message(raw: bytes, *, max_attachment_bytes: int) -> dict[str, Any]:
    """The run input of ``raw`` (shape in the module doc); attachments over
    ``max_attachment_bytes`` keep only their metadata. Never raises for a malformed
    message: what cannot be read is left empty."""
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)  # what policy.default builds
    senders = _addresses(message, "from")
    references = _text(message, "references")
    headers = {
        "from": senders[0] if senders else None,
        "to": _addresses(message, "to"),
        "cc": _addresses(message, "cc"),
        "reply_to": _addresses(message, "reply-to"),
        "subject": _text(message, "subject"),
        "date": _date(message),
        "message_id": _text(message, "message-id"),
        "in_reply_to": _text(message, "in-reply-to"),
        "references": references.split() if references else [],
    }
    attachments = [
        _attachment(part, max_attachment_bytes)
        for part in message.iter_attachments()
        if isinstance(part, EmailMessage)
    ]
    return {
        "headers": headers,
        "text": _body(message, "plain"),
        "html": _body(message, "html"),
        "attachments": attachments,
    }
