"""Times as the API answers them: RFC 3339 in UTC ending ``Z`` (docs/api.md, "Answers").

The API encodes its ``datetime`` members with msgspec, which writes a UTC time as
``2026-12-05T04:17:26.063728Z`` (fraction only when non-zero). Times Railyard stores as
JSON text (audit details, pins, trigger samples) are written with :func:`rfc3339` in that
same form, and :func:`rfc3339_text` rewrites the ``+00:00`` form Python's
``datetime.isoformat()`` wrote into rows stored before, as they are read back.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, overload

_UTC_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?\+00:00$")
"""A time as ``datetime.isoformat()`` writes one in UTC (``2026-12-05T04:17:26+00:00``)."""


@overload
def rfc3339(value: datetime) -> str: ...


@overload
def rfc3339(value: None) -> None: ...


def rfc3339(value: datetime | None) -> str | None:
    """``value`` in UTC as RFC 3339 text ending ``Z``, as msgspec answers a ``datetime``
    (microseconds kept; ``None`` stays ``None``). A naive ``value`` is taken as local time,
    as :meth:`datetime.astimezone` does."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def rfc3339_text(value: Any) -> Any:
    """``value`` ending ``Z`` when it is the text of a UTC time ending ``+00:00`` (as
    stored before times were written with :func:`rfc3339`); any other value unchanged."""
    if isinstance(value, str) and _UTC_TEXT.match(value):
        return value[: -len("+00:00")] + "Z"
    return value


def rfc3339_members(value: Any, suffix: str = "") -> Any:
    """A JSON object with its top-level members whose name ends with ``suffix`` (every
    member with ``""``) passed through :func:`rfc3339_text`; other members may hold a
    caller's data and are returned as stored, as is any value other than an object."""
    if not isinstance(value, dict):
        return value
    return {k: rfc3339_text(v) if str(k).endswith(suffix) else v for k, v in value.items()}
