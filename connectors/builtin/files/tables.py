"""CSV and JSON Lines: ``files.csv_read``, ``files.csv_write``, ``files.jsonl_read``,
``files.jsonl_write`` (Python's ``csv`` module, RFC 4180 quoting; msgspec for JSON).

- ``csv_read`` -> ``{"items", "count", "columns"}``: one object per record, keyed by
  the header row (``header`` on; a blank or repeated name becomes ``column_<n>``) or
  ``column_1``, ``column_2``, ... Values are text. ``delimiter`` ``auto`` takes the most
  frequent of comma, semicolon, tab and pipe in the first line. A record with more
  fields than the header fails the step (kind ``csv_malformed``, naming its line), as
  does a quote left open; a shorter record gets ``""`` for the missing fields. More
  than ``max_rows`` records fail the step (``too_many_rows``).
- ``csv_write`` -> a file reference (``text/csv``, UTF-8): ``columns`` (default: every
  key of the items, in first-seen order) as the header, then one record per item;
  objects and lists are written as JSON text. A text cell starting with ``=``, ``+``,
  ``-``, ``@``, tab or carriage return is prefixed with ``'`` when ``escape_formulas``
  is on (default), so a spreadsheet opening the file never runs it as a formula
  (OWASP, "CSV Injection").
- ``jsonl_read`` -> ``{"items", "count"}``: one JSON value per non-blank line; a line
  that is not JSON fails the step (kind ``jsonl_malformed``, naming the line).
- ``jsonl_write`` -> a file reference (``application/x-ndjson``): one compact JSON
  value per line.
"""

from __future__ import annotations

import csv
import io
from typing import Annotated, Any, Literal, TypedDict

import msgspec

from connectors import sdk
from connectors.builtin.files.common import (
    DEFAULT_MAX_BYTES,
    FileInput,
    FileRef,
    MaxBytes,
    Rows,
    cell_text,
    file_ref,
    file_text,
    header_names,
    rows_of,
    table_of,
)

__all__ = ["csv_read", "csv_write", "jsonl_read", "jsonl_write"]

Delimiter = Literal["auto", ",", ";", "\t", "|"]
DELIMITER_LABELS = {
    "auto": "Detect",
    ",": "Comma",
    ";": "Semicolon",
    "\t": "Tab",
    "|": "Pipe",
}
MaxRows = Annotated[int, msgspec.Meta(title="Row limit", ge=1, le=10_000_000)]
Encoding = Annotated[str, msgspec.Meta(title="Text encoding", description="e.g. utf-8, latin-1")]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class CsvReadConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.csv_read``."""

    file: FileInput = None
    delimiter: Annotated[
        Delimiter,
        msgspec.Meta(title="Delimiter", extra_json_schema={"x-enum-labels": DELIMITER_LABELS}),
    ] = "auto"
    header: Annotated[bool, msgspec.Meta(title="First row is the header")] = True
    encoding: Encoding = "utf-8"
    max_rows: MaxRows = 100_000
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class CsvWriteConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.csv_write``."""

    items: Rows = None
    columns: Annotated[
        list[str], msgspec.Meta(title="Columns", description="Empty: every key of the items")
    ] = []
    delimiter: Annotated[
        Literal[",", ";", "\t", "|"],
        msgspec.Meta(
            title="Delimiter",
            extra_json_schema={
                "x-enum-labels": {k: v for k, v in DELIMITER_LABELS.items() if k != "auto"}
            },
        ),
    ] = ","
    header: Annotated[bool, msgspec.Meta(title="Write a header row")] = True
    escape_formulas: Annotated[
        bool,
        msgspec.Meta(
            title="Escape formulas",
            description="Prefix cells starting with = + - @ with ' (spreadsheet safety)",
        ),
    ] = True
    filename: Annotated[str, msgspec.Meta(title="File name")] = "items.csv"


class JsonlReadConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.jsonl_read``."""

    file: FileInput = None
    max_rows: MaxRows = 100_000
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class JsonlWriteConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.jsonl_write``."""

    items: Rows = None
    filename: Annotated[str, msgspec.Meta(title="File name")] = "items.jsonl"


class CsvRows(TypedDict):
    """The records as `items` (objects of text, keyed by column), their `count`, and
    the `columns` in file order."""

    items: list[dict[str, str]]
    count: int
    columns: list[str]


class JsonItems(TypedDict):
    """The values, one per line, as `items`, and their `count`."""

    items: list[Any]
    count: int


def _too_many(max_rows: int) -> sdk.NonRetryableError:
    return sdk.NonRetryableError(
        f"the file has more than {max_rows} rows; raise the row limit", kind="too_many_rows"
    )


def _delimiter(text: str, choice: str) -> str:
    """``choice``, or for ``auto`` the most frequent of , ; tab | in the first line
    (a comma when none occurs)."""
    if choice != "auto":
        return choice
    first = text.lstrip("\r\n").split("\n", 1)[0]
    counts = {d: first.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


@sdk.action(
    "files.csv_read",
    label="Read CSV",
    config=CsvReadConfig,
    category="Files",
    icon="file-text",
    description="Parse a CSV file into items, one per record.",
    expression_fields=("file",),
)
async def csv_read(config: CsvReadConfig, input: Any) -> CsvRows:
    """Parse the CSV text (see the module docstring)."""
    text = file_text(config.file, input, config.max_bytes, config.encoding)
    reader = csv.reader(
        io.StringIO(text, newline=""), delimiter=_delimiter(text, config.delimiter), strict=True
    )
    items: list[dict[str, str]] = []
    columns: list[str] = []
    try:
        for record in reader:
            if not record:
                continue
            if not columns:
                if config.header:
                    columns = header_names(record)
                    continue
                columns = [f"column_{i}" for i in range(1, len(record) + 1)]
            if len(record) > len(columns):
                raise sdk.NonRetryableError(
                    f"CSV line {reader.line_num} has {len(record)} fields, the header "
                    f"{len(columns)}",
                    kind="csv_malformed",
                    details={"line": reader.line_num},
                )
            if len(items) >= config.max_rows:
                raise _too_many(config.max_rows)
            items.append(
                dict(zip(columns, record + [""] * (len(columns) - len(record)), strict=True))
            )
    except csv.Error as err:
        raise sdk.NonRetryableError(
            f"the CSV is malformed at line {reader.line_num}: {err}",
            kind="csv_malformed",
            details={"line": reader.line_num},
        ) from None
    return {"items": items, "count": len(items), "columns": columns}


def _csv_cell(value: Any, escape: bool) -> str:
    text = cell_text(value)
    if escape and isinstance(value, str) and text.startswith(FORMULA_STARTS):
        return "'" + text
    return text


@sdk.action(
    "files.csv_write",
    label="Write CSV",
    config=CsvWriteConfig,
    category="Files",
    icon="file-text",
    description="Write items as a CSV file (a header row, one record per item).",
    expression_fields=("items", "columns", "filename"),
)
async def csv_write(config: CsvWriteConfig, input: Any) -> FileRef:
    """Write the items as CSV (see the module docstring)."""
    rows, columns = table_of(config.items, input, config.columns)
    out = io.StringIO(newline="")
    writer = csv.writer(out, delimiter=config.delimiter, lineterminator="\r\n")
    if config.header:
        writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_cell(row.get(c), config.escape_formulas) for c in columns])
    return file_ref(out.getvalue().encode("utf-8"), config.filename, "text/csv")


@sdk.action(
    "files.jsonl_read",
    label="Read JSON Lines",
    config=JsonlReadConfig,
    category="Files",
    icon="braces",
    description="Parse a JSON Lines file into items, one per line.",
    expression_fields=("file",),
)
async def jsonl_read(config: JsonlReadConfig, input: Any) -> JsonItems:
    """Parse one JSON value per line."""
    text = file_text(config.file, input, config.max_bytes, "utf-8")
    items: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(items) >= config.max_rows:
            raise _too_many(config.max_rows)
        try:
            items.append(msgspec.json.decode(line))
        except msgspec.DecodeError as err:
            raise sdk.NonRetryableError(
                f"JSON Lines line {number} is not JSON: {err}",
                kind="jsonl_malformed",
                details={"line": number},
            ) from None
    return {"items": items, "count": len(items)}


@sdk.action(
    "files.jsonl_write",
    label="Write JSON Lines",
    config=JsonlWriteConfig,
    category="Files",
    icon="braces",
    description="Write items as a JSON Lines file, one compact JSON value per line.",
    expression_fields=("items", "filename"),
)
async def jsonl_write(config: JsonlWriteConfig, input: Any) -> FileRef:
    """One line per item."""
    rows = rows_of(config.items, input)
    data = b"".join(msgspec.json.encode(row) + b"\n" for row in rows)
    return file_ref(data, config.filename, "application/x-ndjson")
