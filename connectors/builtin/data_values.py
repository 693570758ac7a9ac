"""What the Data nodes share: the items a node works on, dotted paths, numbers, time zones
and moments (connectors/builtin/data.py and the item-list, crypto and date nodes beside it).

- :func:`items_of`: a node's ``items`` field (an expression field), or the step input when
  it is empty; an input ``{"items": [...]}`` (what list nodes output) gives its list.
- :func:`get_path`: dotted paths, ``address.city``, ``tags.0`` (``-1`` the last); a
  missing path is ``None``.
- :func:`parse_moment`: ISO 8601 (``Z`` allowed), epoch seconds, or ``"now"``; a naive
  time is read in the given zone by the product's one rule for local times
  (:mod:`connectors.sdk.wallclock`: a time in a DST gap is the first instant after it, a
  repeated time its first occurrence).
"""

from __future__ import annotations

import numbers
from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from connectors import sdk
from connectors.sdk.wallclock import local_to_utc

__all__ = ["Items", "get_path", "is_number", "items_of", "parse_moment", "zone"]

Items = Annotated[
    Any,
    msgspec.Meta(title="Items", description="A list; defaults to the step input"),
]


def get_path(value: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``value`` (``None`` when missing)."""
    if not path:
        return value
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.lstrip("-").isdigit():
            index = int(part)
            value = value[index] if -len(value) <= index < len(value) else None
        else:
            return None
    return value


def items_of(items: Any, input: Any, field: str = "items") -> list[Any]:
    """The list a node works on (see the module doc). Raises
    :class:`~connectors.sdk.ConfigError` naming ``field`` when it is not a list."""
    source = input if items is None else items
    if isinstance(source, dict) and isinstance(source.get("items"), list) and items is None:
        source = source["items"]
    if not isinstance(source, list):
        raise sdk.ConfigError(f"{field} must be a list, got {type(source).__name__}")
    return source


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; :class:`~connectors.sdk.ConfigError` when unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise sdk.ConfigError(f"unknown timezone {name!r} (use an IANA name)") from None


def parse_moment(value: Any, naive_zone: ZoneInfo) -> datetime:
    """An aware datetime from ``value`` (see the module doc). Raises
    :class:`~connectors.sdk.NonRetryableError` of kind ``invalid_datetime``."""
    if value in (None, "", "now"):
        return datetime.now(UTC)
    if is_number(value):
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise sdk.NonRetryableError(
                f"cannot parse {value!r} as an ISO 8601 date/time", kind="invalid_datetime"
            ) from None
        if moment.tzinfo:
            return moment
        return local_to_utc(moment, naive_zone).astimezone(naive_zone)
    raise sdk.NonRetryableError(f"cannot parse {value!r} as a date/time", kind="invalid_datetime")
