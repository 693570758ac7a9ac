"""Turning a step's config into the HTTP request its operation describes.

Serialisation follows OpenAPI 3.0.3 "Style Values" and "Style Examples": path ``simple``
(arrays comma-joined, objects ``k,v`` or ``k=v`` exploded), query ``form`` (arrays as
repeated keys when exploded, comma-joined otherwise; objects as their properties when
exploded), ``spaceDelimited`` / ``pipeDelimited``, ``deepObject`` (``p[k]=v``), header
``simple``, cookie ``form``. Bodies: JSON, ``application/x-www-form-urlencoded`` (objects
and arrays of a property as ``p[k]=v`` / ``p[0]=v``, the bracket form Stripe reads),
``multipart/form-data`` (each property a part; objects as JSON text; binary properties
as file parts, :mod:`.parts`) and ``text/plain``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from .definition import FieldSpec, OperationSpec
from .parts import file_part

Part = tuple[str, tuple[str | None, str | bytes, str]]
"""A multipart part as httpx takes it: ``(name, (filename, content, media type))``; no
filename for a plain field."""


class Request:
    """What :func:`build_request` produces: method, URL, params, headers, cookies, and
    the body as ``json``, multipart ``files`` or text ``content``."""

    def __init__(self, method: str, url: str) -> None:
        self.method = method
        self.url = url
        self.params: list[tuple[str, str]] = []
        self.headers: dict[str, str] = {}
        self.cookies: dict[str, str] = {}
        self.json: Any = None
        self.files: list[Part] | None = None
        self.content: str | None = None


def scalar(value: Any) -> str:
    """A primitive as text on the wire (``true``/``false`` for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _simple(value: Any, explode: bool) -> str:
    if isinstance(value, list):
        return ",".join(scalar(v) for v in value)
    if isinstance(value, dict):
        sep = "=" if explode else ","
        return ",".join(f"{k}{sep}{scalar(v)}" for k, v in value.items())
    return scalar(value)


def _query(field: FieldSpec, value: Any) -> list[tuple[str, str]]:
    name = field.wire_name
    if field.as_json:
        return [(name, json.dumps(value, separators=(",", ":")))]
    if field.style == "deepObject" and isinstance(value, dict):
        return [(f"{name}[{k}]", scalar(v)) for k, v in value.items()]
    if isinstance(value, list):
        if field.style == "spaceDelimited":
            return [(name, " ".join(scalar(v) for v in value))]
        if field.style == "pipeDelimited":
            return [(name, "|".join(scalar(v) for v in value))]
        if field.explode:
            return [(name, scalar(v)) for v in value]
        return [(name, ",".join(scalar(v) for v in value))]
    if isinstance(value, dict):
        if field.explode:
            return [(k, scalar(v)) for k, v in value.items()]
        return [(name, _simple(value, False))]
    return [(name, scalar(value))]


def _part_type(value: Any) -> str:
    return "application/json" if isinstance(value, dict | list) else "text/plain"


def form_pairs(name: str, value: Any) -> list[tuple[str, str]]:
    """``name``'s value as form pairs, nested values in brackets (``a[b][0]=c``)."""
    if isinstance(value, dict):
        if not value:
            return [(name, "")]
        return [pair for k, v in value.items() for pair in form_pairs(f"{name}[{k}]", v)]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in form_pairs(f"{name}[{i}]", v)]
    return [(name, scalar(value))]


def _multipart(operation: OperationSpec, payload: Any) -> list[Part]:
    files = {f.wire_name: f for f in operation.fields if f.location == "body" and f.file}
    parts = payload.items() if isinstance(payload, dict) else [("body", payload)]
    out: list[Part] = []
    for name, value in parts:
        spec = files.get(name)
        if spec is None:
            out.append((name, (None, scalar(value), _part_type(value))))
            continue
        for one in value if isinstance(value, list) else [value]:
            out.append((name, file_part(name, one, spec.content_type)))
    return out


def build_request(operation: OperationSpec, base_url: str, config: dict[str, Any]) -> Request:
    """The request for ``config`` (field name -> value; absent or ``None``: not sent)."""
    path = operation.path
    request = Request(operation.method, "")
    body: dict[str, Any] = {}
    whole: Any = None
    has_whole = False
    for field in operation.fields:
        value = config.get(field.name)
        if value is None:
            continue
        if field.location == "path":
            text = _simple(value, field.explode)
            path = path.replace("{" + field.wire_name + "}", quote(text, safe=""))
        elif field.location == "query":
            request.params += _query(field, value)
        elif field.location == "header":
            request.headers[field.wire_name] = (
                json.dumps(value) if field.as_json else _simple(value, field.explode)
            )
        elif field.location == "cookie":
            request.cookies[field.wire_name] = scalar(value)
        elif field.location == "body":
            body[field.wire_name] = value
        else:
            whole, has_whole = value, True
    request.url = (operation.server_url or base_url).rstrip("/") + path
    media = operation.body_media_type.split(";")[0].strip()
    if not media or not (body or has_whole):
        return request
    payload = whole if has_whole else body
    if media == "application/x-www-form-urlencoded":
        if isinstance(payload, dict):
            pairs = [pair for k, v in payload.items() for pair in form_pairs(k, v)]
            request.content = urlencode(pairs)
        else:
            request.content = scalar(payload)
        request.headers["Content-Type"] = media
    elif media == "multipart/form-data":
        request.files = _multipart(operation, payload)
    elif media == "text/plain":
        request.content = scalar(payload)
        request.headers["Content-Type"] = "text/plain; charset=utf-8"
    else:
        request.json = payload
        if media != "application/json":
            request.headers["Content-Type"] = media
    return request
