"""Turn an HTTP request into a webhook run input.

The run input of a webhook trigger is::

    {"method": "POST",
     "path": "/hooks/<token>/<suffix>",
     "query": {"a": "1", "tag": ["x", "y"]},                   # repeated keys become lists
     "headers": {"content-type": "application/json", ...},    # names lower-cased
     "auth": {"kind": "hmac", "verified": true, "scheme": "github"},
     "body": <parsed body, see below>,
     "files": [{"field", "filename", "content_type", "size", "sha256", "ref"}, ...]}

:func:`build_run_input` is the one place a run input is made from a request: secret
headers (the webhook's own authentication, cookies, signatures; the rule is in
:mod:`backend.triggers.redaction`) have the value ``"[redacted]"`` before anything stores it.

Bodies, by media type (the ``charset`` parameter is honoured for text; an unknown charset
falls back to UTF-8; undecodable bytes become U+FFFD, never an error):

- ``application/json``, ``*/*+json`` (or no type and a body starting with ``{``/``[``):
  the parsed value. An empty or whitespace-only body is ``{}``. Malformed JSON is rejected
  with :class:`BodyError` (HTTP 400) naming the line, column and character offset.
- ``application/x-www-form-urlencoded``: an object; repeated keys become lists.
- ``multipart/form-data``: the text fields as an object (repeated names become lists);
  each file part becomes an entry of ``files`` (stored in the ``files`` table, referenced by
  ``ref = "file:<uuid>"``; the run row never holds file bytes).
- ``text/*``, ``application/xml``, ``*/*+xml``: the decoded text.
- anything else (or bytes that are not UTF-8 without a type): ``{"$base64": "...",
  "content_type": "...", "size": n}`` (``$base64`` marks raw bytes).
- no body at all: ``null``.
"""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import msgspec
import multipart

from backend.engine.nodes.trigger_webhook import WebhookConfig
from backend.triggers.redaction import auth_summary, redact_headers, secret_header_names
from designer_schema.limits import json_depth

MULTIPART_CHUNK = 64 * 1024


class BodyError(ValueError):
    """The request body cannot be parsed; the message says why and where."""


@dataclass
class UploadedFile:
    """One file part of a multipart body (``size`` in bytes, ``sha256`` hex)."""

    field: str
    filename: str
    content_type: str
    content: bytes
    sha256: str

    @property
    def size(self) -> int:
        return len(self.content)


@dataclass
class ParsedBody:
    """The run input's ``body`` plus the files to store (multipart only)."""

    body: Any
    files: list[UploadedFile] = field(default_factory=list)


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


def build_run_input(
    *,
    method: str,
    path: str,
    query: Iterable[tuple[str, str]],
    headers: Mapping[str, str],
    body: Any,
    config: WebhookConfig,
    redact: Iterable[str] = (),
) -> dict[str, Any]:
    """The run input of an authenticated webhook request (shape in the module docstring).

    ``headers`` have lower-case names; ``config`` is the trigger's config; ``redact`` the
    extra header names of the ``RAILYARD_REDACT_HEADERS`` setting. Secret headers are
    redacted here (:func:`backend.triggers.redaction.secret_header_names`); ``files`` starts
    empty (the caller stores uploaded files and fills it).
    """
    return {
        "method": method,
        "path": path,
        "query": parse_query(query),
        "headers": redact_headers(headers, secret_header_names(config, redact)),
        "auth": auth_summary(config),
        "body": body,
        "files": [],
    }


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            return value.strip().strip('"')
    return "utf-8"


def _known(charset: str) -> str:
    try:
        return codecs.lookup(charset).name
    except LookupError:
        return "utf-8"


def decode_text(raw: bytes, charset: str) -> str:
    """Decode with ``charset`` (UTF-8 when unknown), replacing invalid bytes."""
    try:
        return raw.decode(charset, errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def _raw_bytes(raw: bytes, media: str) -> dict[str, Any]:
    return {
        "$base64": base64.b64encode(raw).decode("ascii"),
        "content_type": media or "application/octet-stream",
        "size": len(raw),
    }


DEFAULT_MAX_JSON_DEPTH = 64
"""Nesting levels a JSON body may have unless the caller says otherwise."""


def parse_json_text(text: str, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> Any:
    """Parse JSON; empty/whitespace is ``{}``; raises :class:`BodyError` with the place, or
    naming the limit when the document nests deeper than ``max_depth`` levels."""
    if not text.strip():
        return {}
    too_deep = BodyError(f"JSON body nested deeper than {max_depth} levels (limit max_json_depth)")
    try:
        # msgspec first (about three times faster on a large body); whatever it does not
        # take (malformed, NaN, 1e400, a lone surrogate, a huge integer) is decided by the
        # standard library as before: the same values where both accept the text
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        value = _standard_json(text, too_deep)
    # the brackets in the text bound the depth (a count in C): the walk in Python is
    # needed only when there are more of them than levels allowed
    brackets = text.count("[") + text.count("{")
    if brackets > max_depth and json_depth(value, max_depth) > max_depth:
        raise too_deep
    return value


def _standard_json(text: str, too_deep: BodyError) -> Any:
    """``json.loads(text)``, its errors as :class:`BodyError`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BodyError(
            # some of the decoder's messages end in "at" ("Invalid control character at")
            f"malformed JSON body: {exc.msg.removesuffix(' at')} at line {exc.lineno},"
            f" column {exc.colno} "
            f"(character {exc.pos})"
        ) from exc
    except ValueError as exc:  # an integer longer than Python's 4,300-digit conversion limit
        raise BodyError(f"JSON body not accepted: {exc}") from exc
    except RecursionError:  # deeper than the interpreter's recursion limit
        raise too_deep from None


def parse_request_body(
    content_type: str, raw: bytes, max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> ParsedBody:
    """Parse ``raw`` by ``content_type`` (see the module docstring); a JSON body may nest at
    most ``max_json_depth`` levels. Raises BodyError."""
    media = content_type.split(";")[0].strip().lower()
    charset = _charset(content_type)
    if (
        media == "application/json"
        or media.endswith("+json")
        or (not media and raw.strip()[:1] in (b"{", b"["))
    ):
        return ParsedBody(parse_json_text(decode_text(raw, charset), max_json_depth))
    if media == "multipart/form-data":
        return _parse_multipart(content_type, raw)
    if not raw:
        return ParsedBody(None)
    if media == "application/x-www-form-urlencoded":
        text = raw.decode("latin-1")  # percent-escapes are decoded with the charset below
        pairs = parse_qsl(text, keep_blank_values=True, encoding=_known(charset), errors="replace")
        return ParsedBody(parse_query(pairs))
    if media.startswith("text/") or media in ("application/xml",) or media.endswith("+xml"):
        return ParsedBody(decode_text(raw, charset))
    if not media:
        try:
            return ParsedBody(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return ParsedBody(_raw_bytes(raw, media))
    return ParsedBody(_raw_bytes(raw, media))


def parse_body(content_type: str, raw: bytes) -> Any:
    """Only the ``body`` of :func:`parse_request_body` (files are dropped)."""
    return parse_request_body(content_type, raw).body


def _parse_multipart(content_type: str, raw: bytes) -> ParsedBody:
    _, options = multipart.parse_options_header(content_type)
    boundary = options.get("boundary")
    if not boundary:
        raise BodyError("multipart/form-data body without a boundary parameter")
    fields: dict[str, Any] = {}
    files: list[UploadedFile] = []
    segment: Any = None
    parts: list[bytes] = []
    digest = hashlib.sha256()
    try:
        with multipart.PushMultipartParser(boundary, max_header_count=16) as parser:
            for start in range(0, max(len(raw), 1), MULTIPART_CHUNK):
                for event in parser.parse(raw[start : start + MULTIPART_CHUNK]):
                    if isinstance(event, multipart.MultipartSegment):
                        segment, parts, digest = event, [], hashlib.sha256()
                    elif event:
                        parts.append(event)
                        digest.update(event)
                    else:
                        _finish_part(segment, b"".join(parts), digest, fields, files)
            for event in parser.parse(b""):
                if event is None:
                    _finish_part(segment, b"".join(parts), digest, fields, files)
    except multipart.MultipartError as exc:
        raise BodyError(f"malformed multipart/form-data body: {exc}") from exc
    return ParsedBody(fields, files)


def _finish_part(
    segment: Any,
    content: bytes,
    digest: Any,
    fields: dict[str, Any],
    files: list[UploadedFile],
) -> None:
    name = segment.name or ""
    if segment.filename is not None:
        files.append(
            UploadedFile(
                field=name,
                filename=segment.filename,
                content_type=segment.content_type or "application/octet-stream",
                content=content,
                sha256=digest.hexdigest(),
            )
        )
        return
    value = decode_text(content, segment.charset or "utf-8")
    if name in fields:
        existing = fields[name]
        fields[name] = [*existing, value] if isinstance(existing, list) else [existing, value]
    else:
        fields[name] = value
