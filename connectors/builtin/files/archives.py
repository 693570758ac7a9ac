"""Compression: ``files.compress`` (ZIP or gzip) and ``files.decompress``.

- ``compress`` -> a file reference: ``files`` (file references or text, each with its
  ``filename``) packed into a ZIP archive (deflate), or one file gzip-compressed.
- ``decompress`` -> ``{"files": [file references], "count"}``: the members of a ZIP
  archive (directories skipped; names as stored, which only label the values: nothing
  is written to disk) or the content of a gzip file (``format`` ``auto`` tells them by
  their first bytes). Decompression bombs are stopped by counting the bytes really
  unpacked, never trusting sizes an archive declares: more than ``max_unpacked_bytes``
  in all (default 100 MiB), or more than ``max_files`` members, fail the step with kind
  ``file_too_large`` as soon as the limit is passed. A ZIP is first checked against
  the sizes and ratios it declares (:func:`connectors.builtin.files.excel.check_archive`).
  Encrypted members and unsupported methods are kind ``archive_unsupported``; a file
  that is neither format, or a corrupt one, ``archive_malformed``.
"""

from __future__ import annotations

import gzip
import io
import mimetypes
import zipfile
import zlib
from typing import Annotated, Any, Literal, TypedDict

import msgspec

from connectors import sdk
from connectors.builtin.files.common import (
    DEFAULT_MAX_BYTES,
    FileInput,
    FileRef,
    MaxBytes,
    file_bytes,
    file_ref,
)
from connectors.builtin.files.excel import check_archive

__all__ = ["compress", "decompress"]

CHUNK = 64 * 1024


class CompressConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.compress``."""

    files: Annotated[
        Any,
        msgspec.Meta(
            title="Files",
            description="A list of file references (or one); defaults to the step input",
        ),
    ] = None
    format: Annotated[
        Literal["zip", "gzip"],
        msgspec.Meta(
            title="Format", extra_json_schema={"x-enum-labels": {"zip": "ZIP", "gzip": "gzip"}}
        ),
    ] = "zip"
    filename: Annotated[
        str, msgspec.Meta(title="File name", description="Empty: archive.zip or <file>.gz")
    ] = ""
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class DecompressConfig(msgspec.Struct, kw_only=True):
    """Config of ``files.decompress``."""

    file: FileInput = None
    format: Annotated[
        Literal["auto", "zip", "gzip"],
        msgspec.Meta(
            title="Format",
            extra_json_schema={"x-enum-labels": {"auto": "Detect", "zip": "ZIP", "gzip": "gzip"}},
        ),
    ] = "auto"
    max_unpacked_bytes: Annotated[
        int, msgspec.Meta(title="Unpacked size limit (bytes)", ge=1, le=1024 * 1024 * 1024)
    ] = 100 * 1024 * 1024
    max_files: Annotated[int, msgspec.Meta(title="File limit", ge=1, le=100_000)] = 1000
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class Unpacked(TypedDict):
    """The unpacked `files` (file references named as in the archive) and their
    `count`."""

    files: list[FileRef]
    count: int


def _content_type(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _bomb(limit: int) -> sdk.NonRetryableError:
    return sdk.NonRetryableError(
        f"the archive unpacks to more than {limit} bytes: refused as a decompression bomb",
        kind="file_too_large",
    )


@sdk.action(
    "files.compress",
    label="Compress",
    config=CompressConfig,
    category="Files",
    icon="file-archive",
    description="Pack files into a ZIP archive, or gzip one file.",
    expression_fields=("files", "filename"),
)
async def compress(config: CompressConfig, input: Any) -> FileRef:
    """ZIP (deflate) or gzip (see the module docstring)."""
    source = input if config.files is None else config.files
    if isinstance(source, dict) and isinstance(source.get("files"), list):
        source = source["files"]
    entries = source if isinstance(source, list) else [source]
    files = []
    for index, entry in enumerate(entries, start=1):
        data, name = file_bytes(entry, None, config.max_bytes)
        files.append((name or f"file-{index}", data))
    if not files:
        raise sdk.ConfigError("there are no files to compress")
    if config.format == "gzip":
        if len(files) != 1:
            raise sdk.ConfigError(f"gzip compresses one file, got {len(files)}: use ZIP")
        name, data = files[0]
        packed = gzip.compress(data, mtime=0)
        return file_ref(packed, config.filename or f"{name}.gz", "application/gzip")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            archive.writestr(name, data)
    return file_ref(out.getvalue(), config.filename or "archive.zip", "application/zip")


def _gunzip(data: bytes, limit: int) -> bytes:
    """The content of every gzip member of ``data``, at most ``limit`` bytes."""
    out = bytearray()
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # one gzip member
        pending = rest
        while not inflater.eof:
            chunk = inflater.decompress(pending, CHUNK)
            pending = inflater.unconsumed_tail
            if not chunk and not pending:
                raise sdk.NonRetryableError("the gzip data is truncated", kind="archive_malformed")
            out += chunk
            if len(out) > limit:
                raise _bomb(limit)
        rest = inflater.unused_data
    return bytes(out)


def _unzip(data: bytes, config: DecompressConfig) -> list[FileRef]:
    archive = check_archive(data, config.max_unpacked_bytes)
    files: list[FileRef] = []
    total = 0
    for member in archive.infolist():
        if member.is_dir():
            continue
        if len(files) >= config.max_files:
            raise sdk.NonRetryableError(
                f"the archive holds more than {config.max_files} files", kind="file_too_large"
            )
        if member.flag_bits & 0x1:
            raise sdk.NonRetryableError(
                f"{member.filename} is encrypted", kind="archive_unsupported"
            )
        content = bytearray()
        try:
            with archive.open(member) as stream:
                while chunk := stream.read(CHUNK):
                    content += chunk
                    total += len(chunk)
                    if total > config.max_unpacked_bytes:
                        raise _bomb(config.max_unpacked_bytes)
        except NotImplementedError as err:
            raise sdk.NonRetryableError(
                f"{member.filename}: {err}", kind="archive_unsupported"
            ) from None
        files.append(file_ref(bytes(content), member.filename, _content_type(member.filename)))
    return files


@sdk.action(
    "files.decompress",
    label="Decompress",
    config=DecompressConfig,
    category="Files",
    icon="file-archive",
    description="Unpack a ZIP archive or a gzip file, with decompression-bomb limits.",
    expression_fields=("file",),
)
async def decompress(config: DecompressConfig, input: Any) -> Unpacked:
    """Unpack (see the module docstring)."""
    data, name = file_bytes(config.file, input, config.max_bytes)
    kind: str = config.format
    if kind == "auto":
        kind = "zip" if data[:4] == b"PK\x03\x04" else "gzip" if data[:2] == b"\x1f\x8b" else ""
    if not kind:
        raise sdk.NonRetryableError(
            "the file is neither a ZIP archive nor gzip data", kind="archive_malformed"
        )
    try:
        if kind == "gzip":
            content = _gunzip(data, config.max_unpacked_bytes)
            inner = name.removesuffix(".gz") if name.endswith(".gz") else (name or "file")
            files = [file_ref(content, inner, _content_type(inner))]
        else:
            files = _unzip(data, config)
    except (zlib.error, zipfile.BadZipFile, EOFError) as err:
        raise sdk.NonRetryableError(
            f"the {kind} data is corrupt: {err}", kind="archive_malformed"
        ) from None
    return {"files": files, "count": len(files)}
