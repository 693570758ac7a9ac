"""Large values on the run page: where a run value holds previews of large parts
(backend/services/run_values.py), the page lists each one with its size, shape and a
download link under the JSON block. Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The key that marks a large value's preview (backend.db.payloads.MARKER).
_MARKER = "$railyard.payload"


@dataclass(frozen=True)
class LargeValue:
    """One large part of a value: ``path`` where it sits (``$``, ``$.body``, ``$[2]``),
    ``size`` human-readable, ``summary`` its shape, ``url`` the download link."""

    path: str
    size: str
    summary: str
    url: str


def human_size(n: int) -> str:
    """Bytes as ``"900 KB"``, ``"5.0 MB"`` (decimal units, like browsers' downloads)."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.0f} KB"
    return f"{n / 1_000_000:.1f} MB"


def large_values(value: Any, path: str = "$") -> list[LargeValue]:
    """The large-value previews inside ``value`` (depth first, in document order)."""
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
