"""Excel workbooks (``.xlsx``, openpyxl): ``files.excel_read``, ``files.excel_write``.

- ``excel_read`` -> ``{"items", "count", "columns", "sheet", "sheets"}``: the rows of one
  sheet (``sheet``, default the first) as objects keyed by the header row (``header``
  on; a blank or repeated name becomes ``column_<n>``) or by column letters (``A``,
  ``B``, ...). Cells keep their types: numbers, booleans, text; dates and times as ISO
  8601 text; formulas give their last computed value. Fully empty rows are skipped.
  An ``.xlsx`` is a ZIP archive, so before openpyxl opens it the archive's members are
  checked: more than ``max_unpacked_bytes`` in all (default 200 MiB) or a member
  compressed more than 200 : 1 is refused as a decompression bomb (kind
  ``file_too_large``); a file that is not a workbook is kind ``excel_malformed``.
- ``excel_write`` -> a file reference (the ``.xlsx`` media type): one sheet with a
  header row (``columns``, default every key of the items) and a row per item. Text is
  always written as text, never as a formula (a cell ``=HYPERLINK(...)`` shows as typed).
"""

from __future__ import annotations

import io
import zipfile
from datetime import date, datetime, time, timedelta
from typing import Annotated, Any, TypedDict

import msgspec
import openpyxl
from openpyxl.cell import WriteOnlyCell
from openpyxl.utils import get_column_letter
from openpyxl.utils.exceptions import InvalidFileException

from connectors import sdk
from connectors.builtin.files.common import (
    DEFAULT_MAX_BYTES,
    FileInput,
    FileRef,
    MaxBytes,
    Rows,
    cell_text,
    file_bytes,
    file_ref,
    header_names,
    table_of,
)

__all__ = ["MAX_RATIO", "check_archive", "excel_read", "excel_write"]

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
MAX_RATIO = 200
"""Largest compression ratio of one archive member (uncompressed : compressed) that is
not taken for a decompression bomb; real workbooks stay far below (about 10-30 : 1)."""


class ExcelReadConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.excel_read``."""

    file: FileInput = None
    sheet: Annotated[str, msgspec.Meta(title="Sheet", description="Empty: the first")] = ""
    header: Annotated[bool, msgspec.Meta(title="First row is the header")] = True
    max_rows: Annotated[int, msgspec.Meta(title="Row limit", ge=1, le=1_048_576)] = 100_000
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES
    max_unpacked_bytes: Annotated[int, msgspec.Meta(title="Unpacked size limit (bytes)", ge=1)] = (
        200 * 1024 * 1024
    )


class ExcelWriteConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.excel_write``."""

    items: Rows = None
    columns: Annotated[
        list[str], msgspec.Meta(title="Columns", description="Empty: every key of the items")
    ] = []
    sheet: Annotated[str, msgspec.Meta(title="Sheet name", min_length=1, max_length=31)] = "Sheet1"
    filename: Annotated[str, msgspec.Meta(title="File name")] = "items.xlsx"


class ExcelRows(TypedDict):
    """The rows of the `sheet` read as `items` (objects keyed by column), their `count`,
    the `columns` in sheet order and the names of all `sheets` of the workbook."""

    items: list[dict[str, Any]]
    count: int
    columns: list[str]
    sheet: str
    sheets: list[str]


def check_archive(data: bytes, max_unpacked: int) -> zipfile.ZipFile:
    """``data`` opened as a ZIP archive after the bomb checks (see the module docstring).

    The sizes checked are those the archive declares; readers of its members must still
    stop at the declared size (:mod:`connectors.builtin.files.archives` counts the bytes
    it really unpacks). Raises ``sdk.NonRetryableError``: kind ``file_too_large`` for a
    bomb, ``archive_malformed`` for a file that is not a ZIP archive.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as err:
        raise sdk.NonRetryableError(
            f"the file is not a ZIP archive: {err}", kind="archive_malformed"
        ) from None
    total = 0
    for member in archive.infolist():
        total += member.file_size
        ratio = member.file_size / max(member.compress_size, 1)
        if total > max_unpacked or (member.file_size > 1024 * 1024 and ratio > MAX_RATIO):
            raise sdk.NonRetryableError(
                f"the archive unpacks to more than allowed ({member.filename}: "
                f"{member.file_size} bytes, ratio {ratio:.0f}:1; limit {max_unpacked} bytes, "
                f"{MAX_RATIO}:1): refused as a decompression bomb",
                kind="file_too_large",
            )
    return archive


def _value(value: Any) -> Any:
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


@sdk.action(
    "files.excel_read",
    label="Read Excel",
    config=ExcelReadConfig,
    category="Files",
    icon="sheet",
    description="Read the rows of an Excel (.xlsx) sheet as items.",
    expression_fields=("file", "sheet"),
)
async def excel_read(config: ExcelReadConfig, input: Any) -> ExcelRows:
    """Read one sheet (see the module docstring)."""
    data, _name = file_bytes(config.file, input, config.max_bytes)
    try:
        check_archive(data, config.max_unpacked_bytes)
    except sdk.NonRetryableError as err:
        if err.kind == "archive_malformed":
            raise sdk.NonRetryableError(
                "the file is not an Excel workbook (.xlsx)", kind="excel_malformed"
            ) from None
        raise
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, OSError) as err:
        raise sdk.NonRetryableError(
            f"the file is not a readable Excel workbook: {err}", kind="excel_malformed"
        ) from None
    try:
        sheets = list(workbook.sheetnames)
        name = config.sheet or sheets[0]
        if name not in sheets:
            raise sdk.NonRetryableError(
                f"the workbook has no sheet {name!r} (sheets: {', '.join(sheets)})",
                kind="excel_sheet_missing",
            )
        items: list[dict[str, Any]] = []
        columns: list[str] = []
        for cells in workbook[name].iter_rows(values_only=True):
            if all(c is None or c == "" for c in cells):
                continue
            if not columns:
                if config.header:
                    columns = header_names(["" if c is None else str(_value(c)) for c in cells])
                    continue
                columns = [get_column_letter(i) for i in range(1, len(cells) + 1)]
            if len(cells) > len(columns):
                columns += [get_column_letter(i) for i in range(len(columns) + 1, len(cells) + 1)]
            if len(items) >= config.max_rows:
                raise sdk.NonRetryableError(
                    f"the sheet has more than {config.max_rows} rows; raise the row limit",
                    kind="too_many_rows",
                )
            padded = (*cells, *([None] * (len(columns) - len(cells))))
            items.append({c: _value(v) for c, v in zip(columns, padded, strict=True)})
    finally:
        workbook.close()
    return {
        "items": items,
        "count": len(items),
        "columns": columns,
        "sheet": name,
        "sheets": sheets,
    }


def _cell(sheet: Any, value: Any) -> Any:
    if isinstance(value, dict | list):
        value = cell_text(value)
    cell = WriteOnlyCell(sheet, value=value)
    if isinstance(value, str):
        cell.data_type = "s"  # text stays text: "=..." is never a formula
    return cell


@sdk.action(
    "files.excel_write",
    label="Write Excel",
    config=ExcelWriteConfig,
    category="Files",
    icon="sheet",
    description="Write items as an Excel (.xlsx) workbook with one sheet.",
    expression_fields=("items", "columns", "sheet", "filename"),
)
async def excel_write(config: ExcelWriteConfig, input: Any) -> FileRef:
    """Write one sheet (see the module docstring)."""
    rows, columns = table_of(config.items, input, config.columns)
    workbook = openpyxl.Workbook(write_only=True)
    try:
        sheet = workbook.create_sheet(config.sheet)
    except ValueError as err:
        raise sdk.ConfigError(f"not a valid sheet name {config.sheet!r}: {err}") from None
    sheet.append([_cell(sheet, c) for c in columns])
    for row in rows:
        sheet.append([_cell(sheet, row.get(c)) for c in columns])
    out = io.BytesIO()
    workbook.save(out)
    return file_ref(out.getvalue(), config.filename, XLSX)
