"""Files as step values: the file reference every file node reads and writes.

A file travels between steps as a **file reference**, the object ``http.request``
returns with *Response format: bytes* and ``email.send`` attaches::

    {"filename": "report.csv", "content_type": "text/csv", "size": 1234,
     "base64": "<the bytes, base64>"}

It is run data like any other: above ``RAILYARD_PAYLOAD_INLINE_LIMIT`` (256 KiB of JSON)
the engine stores it once, by reference (``backend/db/payloads.py``), and the run page
offers it as a download (docs/engine.md, "Large values"). A reader node takes a file
reference or plain text (the text's UTF-8 bytes), and refuses more than its *Size limit*
(``max_bytes``) with kind ``file_too_large`` before decoding it.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any, TypedDict

import msgspec

from connectors import sdk

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FileInput",
    "FileRef",
    "MaxBytes",
    "Rows",
    "cell_text",
    "file_bytes",
    "file_ref",
    "file_text",
    "header_names",
    "rows_of",
    "table_of",
]

DEFAULT_MAX_BYTES = 50 * 1024 * 1024
"""Default *Size limit* of a file a node reads or writes (50 MiB)."""

FileInput = Annotated[
    Any,
    msgspec.Meta(
        title="File",
        description="A file reference ({filename, content_type, base64}) or text; "
        "defaults to the step input",
    ),
]
MaxBytes = Annotated[int, msgspec.Meta(title="Size limit (bytes)", ge=1, le=1024 * 1024 * 1024)]
Rows = Annotated[
    Any,
    msgspec.Meta(
        title="Items",
        description="A list of objects; defaults to the step input's items",
    ),
]


class FileRef(TypedDict):
    """A file: its `filename`, `content_type` (media type), `size` in bytes and the
    content as `base64`. Large files are stored once by reference like every large run
    value, and downloadable from the run page."""

    filename: str
    content_type: str
    size: int
    base64: str


def file_ref(data: bytes, filename: str, content_type: str) -> FileRef:
    """The file reference of ``data``."""
    return {
        "filename": filename,
        "content_type": content_type,
        "size": len(data),
        "base64": base64.b64encode(data).decode("ascii"),
    }


def file_bytes(value: Any, input: Any, max_bytes: int) -> tuple[bytes, str]:
    """The bytes and file name of ``value`` (a file reference or text; ``None``: the step
    input, or the input's ``file`` when it holds one).

    Raises ``sdk.ConfigError`` for anything else or invalid base64, and
    ``sdk.NonRetryableError`` (kind ``file_too_large``) past ``max_bytes``.
    """
    source = input if value is None else value
    if value is None and isinstance(source, dict) and "base64" not in source:
        source = source.get("file", source)
    if isinstance(source, str):
        data = source.encode("utf-8")
        name = ""
    elif isinstance(source, dict) and isinstance(source.get("base64"), str):
        encoded = source["base64"]
        if len(encoded) > (max_bytes + 2) // 3 * 4 + 4:
            raise _too_large(max_bytes)
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise sdk.ConfigError("the file's base64 content is not valid base64") from None
        name = str(source.get("filename") or "")
    else:
        raise sdk.ConfigError(
            "expected a file reference ({filename, content_type, base64}) or text, got "
            + type(source).__name__
        )
    if len(data) > max_bytes:
        raise _too_large(max_bytes)
    return data, name


def file_text(value: Any, input: Any, max_bytes: int, encoding: str) -> str:
    """The text of a file (see :func:`file_bytes`), a leading byte-order mark dropped.

    Raises ``sdk.NonRetryableError`` (kind ``file_encoding``) when it is not ``encoding``.
    """
    data, _name = file_bytes(value, input, max_bytes)
    try:
        text = data.decode(encoding)
    except LookupError:
        raise sdk.ConfigError(f"unknown text encoding {encoding!r}") from None
    except UnicodeDecodeError as err:
        raise sdk.NonRetryableError(
            f"the file is not {encoding} text (byte {err.start}); pick its encoding",
            kind="file_encoding",
        ) from None
    return text.removeprefix("\ufeff")


def _too_large(max_bytes: int) -> sdk.NonRetryableError:
    return sdk.NonRetryableError(
        f"the file is larger than the size limit ({max_bytes} bytes)", kind="file_too_large"
    )


def rows_of(items: Any, input: Any) -> list[Any]:
    """The list to write: ``items``, else the step input (its ``items`` when an object
    holds them). Raises ``sdk.ConfigError`` when it is not a list."""
    source = input if items is None else items
    if isinstance(source, dict) and items is None and isinstance(source.get("items"), list):
        source = source["items"]
    if not isinstance(source, list):
        raise sdk.ConfigError(f"items must be a list, got {type(source).__name__}")
    return source


def table_of(items: Any, input: Any, columns: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows to write as a table (:func:`rows_of`, each an object) and the columns:
    ``columns``, else every key of the rows in first-seen order. Raises
    ``sdk.ConfigError`` for a row that is not an object."""
    rows = rows_of(items, input)
    seen: dict[str, None] = {}
    for row in rows:
        if not isinstance(row, dict):
            raise sdk.ConfigError(f"items must be objects, got {type(row).__name__}")
        seen.update(dict.fromkeys(row))
    return rows, list(columns) or list(seen)


def header_names(names: list[str]) -> list[str]:
    """Column names from a header row: each trimmed; a blank or repeated one becomes
    ``column_<n>`` (its 1-based position)."""
    seen: set[str] = set()
    columns = []
    for index, name in enumerate(names, start=1):
        name = name.strip()
        if not name or name in seen:
            name = f"column_{index}"
        seen.add(name)
        columns.append(name)
    return columns


def cell_text(value: Any) -> str:
    """A value as one text cell: text as is, ``None`` empty, numbers and booleans as
    JSON spells them, objects and lists as JSON text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
