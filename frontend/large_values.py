"""Large values on the run page: where a run value holds previews of large parts
(backend/services/runs/run_values.py), the page lists each one with its size, shape and a
download link under the JSON block. Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The key that marks a large value's preview (backend.db.payloads.MARKER).
_MARKER = "$railyard.payload"
#: How a webhook's uploaded file is referenced in run data (backend.services.triggers.webhooks).
_FILE_PREFIX = "file:"


@dataclass(frozen=True)
class LargeValue:
    """One large part of a value: ``path`` where it sits (``$``, ``$.body``, ``$[2]``),
    ``size`` human-readable, ``summary`` its shape, ``url`` the download link; ``file``:
    an uploaded file (shown whole by its link, not a preview)."""

    path: str
    size: str
    summary: str
    url: str
    file: bool = False


def human_size(n: int) -> str:
    """Bytes as ``"900 KB"``, ``"5.0 MB"`` (decimal units, like browsers' downloads)."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.0f} KB"
    return f"{n / 1_000_000:.1f} MB"


def large_values(value: Any, path: str = "$") -> list[LargeValue]:
    """The large-value previews and uploaded-file descriptors (``{"filename", "size",
    "ref": "file:<id>", ...}``, downloaded from ``/api/v1/files/<id>``) inside ``value``
    (depth first, in document order)."""
    if isinstance(value, dict):
        url = value.get("download_url")
        if isinstance(value.get(_MARKER), str) and isinstance(url, str):
            size = value.get("bytes")
            return [
                LargeValue(
                    path,
                    human_size(size) if isinstance(size, int) else "?",
                    str(value.get("summary") or ""),
                    url,
                )
            ]
        ref = value.get("ref")
        if isinstance(ref, str) and ref.startswith(_FILE_PREFIX) and "filename" in value:
            size = value.get("size")
            return [
                LargeValue(
                    path,
                    human_size(size) if isinstance(size, int) else "?",
                    f"uploaded file {value.get('filename')}",
                    f"/api/v1/files/{ref[len(_FILE_PREFIX) :]}",
                    file=True,
                )
            ]
        found: list[LargeValue] = []
        for key, item in value.items():
            found += large_values(item, f"{path}.{key}")
        return found
    if isinstance(value, list):
        found = []
        for i, item in enumerate(value):
            found += large_values(item, f"{path}[{i}]")
        return found
    return []
