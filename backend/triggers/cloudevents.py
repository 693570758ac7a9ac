"""CloudEvents on a webhook: the HTTP binding's three content modes turned into run inputs.

A webhook whose trigger sets ``cloudevents`` (``trigger.webhook`` version 2) accepts
CloudEvents 1.0 (and 0.3) in the HTTP protocol binding's modes, told apart as the binding
says (the media type first, then ``ce-`` headers):

- **structured**: ``Content-Type: application/cloudevents+json``, the event as JSON;
- **batched**: ``Content-Type: application/cloudevents-batch+json``, a JSON array of
  events (possibly empty);
- **binary**: the attributes in ``ce-<name>`` headers (percent-encoded), ``Content-Type``
  as ``datacontenttype``, the body as ``data``.

Each event becomes one run input::

    {"specversion": "1.0", "id": "A234-1234", "source": "/mycontext",
     "type": "com.example.someevent", "subject": null, "time": "2025-01-06T10:00:00Z",
     "datacontenttype": "application/json", "dataschema": null,
     "extensions": {"traceparent": "00-..."}, "data": {...}}

``subject``, ``time``, ``datacontenttype`` and ``dataschema`` are ``null`` when the event
has none; ``time`` is the sender's RFC 3339 text; ``extensions`` holds every other
attribute. ``data`` is read as a webhook body is (:mod:`backend.triggers.webhook_input`):
JSON data as its value, text as text, anything else (and structured ``data_base64``) as
``{"$base64", "content_type", "size"}``, no data as ``null``.

The attributes are checked by the ``cloudevents`` SDK (its v1.0 and v0.3 event types);
``specversion``, ``id``, ``source`` and ``type`` must be present and non-empty. What the
SDK would fill in by itself (a missing ``id`` or ``time``) is refused or left out, never
invented. Any problem raises :class:`CloudEventError` (the webhook answers 400 and starts
no run, for a batch none of its runs). :func:`dedupe_value` is the event's idempotency
value, from ``source`` and ``id`` as the specification makes them unique.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from cloudevents.core.bindings.common import get_event_factory_for_version
from cloudevents.core.bindings.http import HTTPMessage, from_binary
from cloudevents.core.exceptions import BaseCloudEventException, CloudEventValidationError
from cloudevents.core.formats.json import JSONFormat
from dateutil.parser import isoparse

from backend.triggers.webhook_input import (
    DEFAULT_MAX_JSON_DEPTH,
    BodyError,
    parse_json_text,
    parse_request_body,
)

STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
REQUIRED = ("specversion", "id", "source", "type")
OPTIONAL = ("subject", "time", "datacontenttype", "dataschema")
SPEC_VERSIONS = ("1.0", "0.3")
MAX_BATCH = 1000
"""Events one batched request may carry."""


class CloudEventError(ValueError):
    """The request is not a valid CloudEvent (or batch); the message says why and where."""


@dataclass(frozen=True)
class ParsedEvent:
    """One event: its run ``input`` (shape in the module doc) and its ``source``/``id``."""

    input: dict[str, Any]

    @property
    def dedupe_value(self) -> str:
        """See :func:`dedupe_value`."""
        return dedupe_value(self.input["source"], self.input["id"])


def dedupe_value(source: str, event_id: str) -> str:
    """``"ce:<40 hex>"``: a digest of ``source`` and ``id`` (a long pair stays unique)."""
    digest = hashlib.sha256(f"{len(source)}:{source}\n{event_id}".encode()).hexdigest()
    return f"ce:{digest[:40]}"


def batched(headers: Mapping[str, str]) -> bool:
    """Whether the request is in batched mode (``headers`` lower-cased)."""
    return _media(headers.get("content-type", "")) == BATCH


def is_structured(headers: Mapping[str, str]) -> bool:
    """Whether the request is in structured mode (``headers`` lower-cased)."""
    return _media(headers.get("content-type", "")) == STRUCTURED


def _media(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _where(index: int | None) -> str:
    return "" if index is None else f"event {index} of the batch: "


def _missing(attributes: Mapping[str, Any], index: int | None, binary: bool) -> None:
    gone = [name for name in REQUIRED if not attributes.get(name)]
    if gone:
        names = ", ".join(f"ce-{n}" if binary else n for n in gone)
        noun = "header" if binary else "attribute"
        raise CloudEventError(
            f"{_where(index)}not a valid CloudEvent: missing required {noun}"
            f"{'s' if len(gone) > 1 else ''} {names}"
        )
    version = attributes["specversion"]
    if version not in SPEC_VERSIONS:
        raise CloudEventError(
            f"{_where(index)}specversion {version!r} is not supported "
            f"(one of {', '.join(SPEC_VERSIONS)})"
        )


def _sdk_error(err: BaseCloudEventException, index: int | None) -> CloudEventError:
    if isinstance(err, CloudEventValidationError):
        parts = [f"{name}: {problems[0]}" for name, problems in err.errors.items() if problems]
        return CloudEventError(f"{_where(index)}invalid CloudEvent attributes: {'; '.join(parts)}")
    return CloudEventError(f"{_where(index)}invalid CloudEvent: {err}")


def _input(attributes: Mapping[str, Any], data: Any) -> dict[str, Any]:
    out: dict[str, Any] = {name: attributes[name] for name in REQUIRED}
    for name in OPTIONAL:
        out[name] = attributes.get(name)
    out["extensions"] = {
        k: v for k, v in attributes.items() if k not in REQUIRED and k not in OPTIONAL
    }
    out["data"] = data
    return out


def _raw(content: bytes, content_type: str) -> dict[str, Any]:
    return {
        "$base64": base64.b64encode(content).decode("ascii"),
        "content_type": content_type or "application/octet-stream",
        "size": len(content),
    }


class _WebhookData(JSONFormat):
    """The SDK's JSON format, with a binary-mode body read as a webhook body is."""

    def __init__(self, max_json_depth: int) -> None:
        self.max_json_depth = max_json_depth

    def read_data(self, body: bytes, datacontenttype: str | None) -> Any:
        content_type = datacontenttype or ""
        if not body:
            return None
        if _media(content_type) == "multipart/form-data":  # files are not event data
            return _raw(body, content_type)
        try:
            return parse_request_body(content_type, body, self.max_json_depth).body
        except BodyError as err:
            raise CloudEventError(f"data: {err}") from None


def _binary(headers: Mapping[str, str], body: bytes, max_json_depth: int) -> ParsedEvent:
    given = {name[3:]: unquote(value) for name, value in headers.items() if name.startswith("ce-")}
    _missing(given, None, binary=True)
    if "time" in given:
        _check_time(given["time"], None)
    message = {name: value for name, value in headers.items() if name.startswith("ce-")}
    if headers.get("content-type"):
        message["content-type"] = headers["content-type"]
        given["datacontenttype"] = headers["content-type"]
    try:
        event = from_binary(HTTPMessage(headers=message, body=body), _WebhookData(max_json_depth))
    except CloudEventError:  # the data, from _WebhookData
        raise
    except BaseCloudEventException as err:
        raise _sdk_error(err, None) from None
    except ValueError as err:  # the SDK's time parser
        raise CloudEventError(f"invalid CloudEvent attributes: {err}") from None
    return ParsedEvent(_input(given, event.get_data()))


def _check_time(value: Any, index: int | None) -> datetime:
    try:
        moment = isoparse(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise CloudEventError(f"{_where(index)}time: {value!r} is not an RFC 3339 timestamp")
    return moment


def _from_object(document: Any, index: int | None) -> ParsedEvent:
    """One event of the JSON format (structured mode or a batch member)."""
    if not isinstance(document, dict):
        raise CloudEventError(f"{_where(index)}a CloudEvent must be a JSON object")
    attributes = {k: v for k, v in document.items() if k not in ("data", "data_base64")}
    _missing(attributes, index, binary=False)
    checked = dict(attributes)
    if "time" in attributes:
        checked["time"] = _check_time(attributes["time"], index)
    data: Any = document.get("data")
    if "data_base64" in document:
        if "data" in document:
            raise CloudEventError(f"{_where(index)}an event has data or data_base64, not both")
        try:
            content = base64.b64decode(str(document["data_base64"]), validate=True)
        except ValueError:
            raise CloudEventError(f"{_where(index)}data_base64 is not base64") from None
        data = _raw(content, str(attributes.get("datacontenttype") or ""))
    try:
        get_event_factory_for_version(str(attributes["specversion"]))(checked, None)
    except BaseCloudEventException as err:
        raise _sdk_error(err, index) from None
    return ParsedEvent(_input(attributes, data))


def parse_cloudevents(
    headers: Mapping[str, str], body: bytes, max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> list[ParsedEvent]:
    """The events of a request (``headers`` lower-cased, ``body`` the raw body): one for
    structured and binary mode, a batch's in order (at most :data:`MAX_BATCH`). Raises
    :class:`CloudEventError` for a request in none of the modes, an invalid event, or
    JSON that is malformed or nested deeper than ``max_json_depth``."""
    content_type = headers.get("content-type", "")
    media = _media(content_type)
    if media in (STRUCTURED, BATCH):
        text = body.decode("utf-8", errors="replace")
        try:
            document = parse_json_text(text, max_json_depth) if text.strip() else None
        except BodyError as err:
            raise CloudEventError(str(err)) from None
        if media == STRUCTURED:
            return [_from_object(document, None)]
        if not isinstance(document, list):
            raise CloudEventError(f"a {BATCH} body must be a JSON array of events")
        if len(document) > MAX_BATCH:
            raise CloudEventError(f"a batch may carry at most {MAX_BATCH} events")
        return [_from_object(item, index) for index, item in enumerate(document)]
    if media.startswith("application/cloudevents"):
        raise CloudEventError(
            f"event format {media} is not supported: send {STRUCTURED} or {BATCH}"
        )
    if any(name.startswith("ce-") for name in headers):
        return [_binary(headers, body, max_json_depth)]
    raise CloudEventError(
        "not a CloudEvent: this webhook takes CloudEvents in binary mode (ce-specversion, "
        f"ce-id, ce-source, ce-type headers), structured mode ({STRUCTURED}) or batched "
        f"mode ({BATCH})"
    )
