"""Built-in Files & formats connector: read and write CSV, JSON Lines, Excel and XML,
extract from HTML, compress and decompress (one module per family; file references in
:mod:`connectors.builtin.files.common`)."""

from __future__ import annotations

from connectors import sdk
from connectors.builtin.files.archives import compress, decompress
from connectors.builtin.files.excel import excel_read, excel_write
from connectors.builtin.files.markup import html_extract, xml_read, xml_write
from connectors.builtin.files.tables import csv_read, csv_write, jsonl_read, jsonl_write

__all__ = ["connector"]

connector = sdk.Connector(
    name="files",
    label="Files & formats",
    version="1.0.0",
    description="CSV, Excel, XML, HTML, JSON Lines, ZIP and gzip",
    actions=[
        csv_read,
        csv_write,
        excel_read,
        excel_write,
        xml_read,
        xml_write,
        html_extract,
        jsonl_read,
        jsonl_write,
        compress,
        decompress,
    ],
    icon="file-text",
)
