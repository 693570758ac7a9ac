"""Binary parts of ``multipart/form-data`` bodies: which properties are files, the config
schema of such a field, and the bytes a step sends for it.

A property is a file when its schema (or, for an array, its items' schema) says the
value is binary: ``format: binary`` (OpenAPI 3.0, "Considerations for File Uploads") or a
``contentMediaType`` (OpenAPI 3.1, JSON Schema's content vocabulary). Its field takes a
**file reference**, the object the file nodes, ``http.request`` (bytes) and
``s3.download`` give::

    {"filename": "photo.png", "content_type": "image/png", "size": 1234,
     "base64": "<the bytes, base64>"}

or text (sent as its UTF-8 bytes). A file above the large-value threshold reaches the step
whole (the engine puts referenced values back before a step runs), so
``=$steps.export`` hands over a file of any size an earlier step made.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from connectors import sdk

MAX_FILE_BYTES = 100 * 1024 * 1024
"""The largest file one part may carry (100 MiB, decoded)."""

FILE_REF: dict[str, Any] = {
    "type": "object",
    "title": "File reference",
    "required": ["base64"],
    "properties": {
        "filename": {"type": "string"},
        "content_type": {"type": "string"},
        "size": {"type": "integer"},
        "base64": {"type": "string", "contentEncoding": "base64"},
    },
}
DESCRIPTION = (
    "A file: a file reference ({filename, content_type, base64}) from an earlier step, or text"
)


def _binary(schema: dict[str, Any]) -> bool:
    return schema.get("format") == "binary" or "contentMediaType" in schema


def is_binary(schema: dict[str, Any]) -> bool:
    """Whether a multipart property of (converted) ``schema`` is a file or a list of
    files."""
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, dict):
        return _binary(items)
    return _binary(schema)


def file_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The config schema of a file property of ``schema`` (a list of files for an
    array)."""
    one = {"anyOf": [FILE_REF, {"type": "string"}], "description": DESCRIPTION}
    if schema.get("type") == "array":
        return {"type": "array", "items": one, "description": "A list of files"}
    return one


def file_part(name: str, value: Any, content_type: str) -> tuple[str, bytes, str]:
    """``(filename, bytes, media type)`` of the part ``name`` for ``value`` (a file
    reference or text). The media type is the file reference's, else ``content_type``
    (from the document's ``encoding``), else ``application/octet-stream``
    (``text/plain; charset=utf-8`` for text).

    Raises ``sdk.ConfigError`` naming the field for anything else or invalid base64, and
    ``sdk.NonRetryableError`` (kind ``file_too_large``) past :data:`MAX_FILE_BYTES`."""
    if isinstance(value, str):
        data = value.encode("utf-8")
        filename, media = name, content_type or "text/plain; charset=utf-8"
    elif isinstance(value, dict) and isinstance(value.get("base64"), str):
        encoded = value["base64"]
        if len(encoded) > (MAX_FILE_BYTES + 2) // 3 * 4 + 4:
            raise _too_large(name)
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise sdk.ConfigError(f"{name}: the file's base64 content is not valid") from None
        filename = str(value.get("filename") or name)
        media = str(value.get("content_type") or content_type or "application/octet-stream")
    else:
        raise sdk.ConfigError(
            f"{name}: expected a file reference ({{filename, content_type, base64}}) or "
            f"text, got {type(value).__name__}"
        )
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(name)
    return filename, data, media


def _too_large(name: str) -> sdk.NonRetryableError:
    return sdk.NonRetryableError(
        f"{name}: the file is larger than {MAX_FILE_BYTES} bytes", kind="file_too_large"
    )
