"""``data.date_calc``: date and time arithmetic beside ``data.datetime`` (which parses,
shifts by days/hours/minutes, converts and formats).

Moments are parsed as ``data.datetime`` parses them (ISO 8601, epoch seconds, ``now``;
naive times in ``timezone``), and calendar units are read on ``timezone``'s wall clock:

- ``add``: ``amount`` (negative subtracts) of ``unit``. ``years``, ``quarters``,
  ``months``: calendar arithmetic, the day clamped to the month's last (Jan 31 + 1 month
  = Feb 28/29); ``weeks``, ``days``: wall-clock days (09:00 stays 09:00 across a DST
  change, the product's one rule for a time that does not exist or exists twice:
  :mod:`connectors.sdk.wallclock`); ``hours``, ``minutes``, ``seconds``: elapsed time.
  ``result`` is ISO 8601 with the zone's offset.
- ``difference``: ``other`` minus ``value`` in ``unit``: ``years``, ``quarters``,
  ``months`` count whole calendar units (negative when ``other`` is earlier), the others
  are exact (fractional) numbers of elapsed units.
- ``start_of`` / ``end_of``: the first (last, to the microsecond) moment of the ``unit``
  (``minutes`` ... ``years``; weeks start on Monday, ISO 8601) holding the moment.
- ``extract``: ``part`` as a number: ``year``, ``quarter``, ``month``, ``day``,
  ``hour``, ``minute``, ``second``, ``weekday`` (1 Monday ... 7 Sunday), ``iso_week``,
  ``day_of_year``.

Output ``{"result", "operation", "timezone"}``; an unparsable moment fails with kind
``invalid_datetime``, an unknown zone is a ``ConfigError``.
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, TypedDict, get_args
from zoneinfo import ZoneInfo

import msgspec

from connectors import sdk
from connectors.builtin.data_values import parse_moment, zone
from connectors.sdk.wallclock import add_local_days, local_to_utc

__all__ = ["date_calc"]

Unit = Literal["seconds", "minutes", "hours", "days", "weeks", "months", "quarters", "years"]
Part = Literal[
    "year", "quarter", "month", "day", "hour", "minute", "second", "weekday", "iso_week",
    "day_of_year",
]  # fmt: skip
UNIT_LABELS = {u: u.capitalize() for u in get_args(Unit)}
PART_LABELS = {p: p.replace("_", " ").capitalize().replace("Iso", "ISO") for p in get_args(Part)}
_ELAPSED = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 604800}
_MONTHS = {"months": 1, "quarters": 3, "years": 12}


class DateCalcConfig(msgspec.Struct, kw_only=True):
    """Add to, compare, round or take apart a date/time."""

    operation: Annotated[
        Literal["add", "difference", "start_of", "end_of", "extract"],
        msgspec.Meta(
            title="Operation",
            extra_json_schema={
                "x-enum-labels": {
                    "add": "Add or subtract",
                    "difference": "Difference",
                    "start_of": "Start of",
                    "end_of": "End of",
                    "extract": "Extract a part",
                }
            },
        ),
    ] = "add"
    value: Annotated[
        Any, msgspec.Meta(title="Value", description="ISO 8601, epoch seconds, or now")
    ] = "now"
    other: Annotated[
        Any, msgspec.Meta(title="Other value", description="Difference: the later moment")
    ] = "now"
    amount: Annotated[float, msgspec.Meta(title="Amount", description="Negative subtracts")] = 0
    unit: Annotated[
        Unit, msgspec.Meta(title="Unit", extra_json_schema={"x-enum-labels": UNIT_LABELS})
    ] = "days"
    part: Annotated[
        Part, msgspec.Meta(title="Part", extra_json_schema={"x-enum-labels": PART_LABELS})
    ] = "year"
    timezone: Annotated[str, msgspec.Meta(title="Timezone", description="IANA name")] = "UTC"


class DateCalcOutput(TypedDict):
    """`result`: ISO 8601 text (add, start_of, end_of) or a number (difference,
    extract); the `operation` and `timezone` it was computed with."""

    result: str | float
    operation: str
    timezone: str


def _add_months(moment: datetime, months: int, tz: ZoneInfo) -> datetime:
    """``moment`` moved by ``months`` on ``tz``'s wall clock, the day clamped to the
    month's last, resolved by the product's rule (a time in a DST gap is the first instant
    after it, :mod:`connectors.sdk.wallclock`)."""
    local = moment.astimezone(tz).replace(tzinfo=None)
    index = local.year * 12 + local.month - 1 + months
    year, month = divmod(index, 12)
    day = min(local.day, calendar.monthrange(year, month + 1)[1])
    return local_to_utc(local.replace(year=year, month=month + 1, day=day), tz).astimezone(tz)


def _add(moment: datetime, amount: float, unit: str, tz: ZoneInfo) -> datetime:
    if unit in _MONTHS:
        if amount != int(amount):
            raise sdk.ConfigError(f"{unit} are added in whole numbers, got {amount}")
        return _add_months(moment, int(amount) * _MONTHS[unit], tz)
    if unit in ("days", "weeks"):
        return add_local_days(moment, amount * (7 if unit == "weeks" else 1), tz).astimezone(tz)
    return (moment.astimezone(UTC) + timedelta(seconds=amount * _ELAPSED[unit])).astimezone(tz)


def _months_between(start: datetime, end: datetime, tz: ZoneInfo) -> int:
    if end < start:
        return -_months_between(end, start, tz)
    months = (end.year - start.year) * 12 + end.month - start.month
    if _add_months(start, months, tz) > end:
        months -= 1
    return months


def _start_of(moment: datetime, unit: str) -> datetime:
    moment = moment.replace(microsecond=0)
    if unit == "seconds":
        return moment
    moment = moment.replace(second=0)
    if unit == "minutes":
        return moment
    moment = moment.replace(minute=0)
    if unit == "hours":
        return moment
    day = moment.replace(hour=0)
    if unit == "days":
        return day
    if unit == "weeks":
        return day - timedelta(days=day.weekday())
    month = day.replace(day=1)
    if unit == "months":
        return month
    if unit == "quarters":
        return month.replace(month=(month.month - 1) // 3 * 3 + 1)
    return month.replace(month=1)


def _local(moment: datetime, tz: ZoneInfo) -> datetime:
    """A wall-clock time of ``tz`` as an aware moment (a time in a DST gap is the first
    instant after it, a repeated time its first occurrence: :mod:`connectors.sdk.wallclock`)."""
    return local_to_utc(moment, tz).astimezone(tz)


def _extract(moment: datetime, part: str) -> int:
    if part == "quarter":
        return (moment.month - 1) // 3 + 1
    if part == "weekday":
        return moment.isoweekday()
    if part == "iso_week":
        return moment.isocalendar().week
    if part == "day_of_year":
        return moment.timetuple().tm_yday
    return int(getattr(moment, part))


@sdk.action(
    "data.date_calc",
    label="Date & time: calculate",
    config=DateCalcConfig,
    category="Data",
    icon="calendar-range",
    expression_fields=("value", "other", "amount"),
)
async def date_calc(config: DateCalcConfig, input: Any) -> DateCalcOutput:
    """Add to, diff, round to a unit or extract a part of a moment."""
    tz = zone(config.timezone)
    moment = parse_moment(config.value, tz).astimezone(tz)
    result: str | float
    if config.operation == "add":
        result = _add(moment, config.amount, config.unit, tz).isoformat()
    elif config.operation == "difference":
        other = parse_moment(config.other, tz).astimezone(tz)
        if config.unit in _MONTHS:
            result = int(_months_between(moment, other, tz) / _MONTHS[config.unit])
        else:
            result = (other - moment).total_seconds() / _ELAPSED[config.unit]
    elif config.operation == "extract":
        result = _extract(moment, config.part)
    else:
        start = _local(_start_of(moment.replace(tzinfo=None), config.unit), tz)
        if config.operation == "end_of":
            following = _add(start, 1, config.unit, tz)
            start = _local(_start_of(following.replace(tzinfo=None), config.unit), tz)
            start = start - timedelta(microseconds=1)
        result = start.isoformat()
    return {"result": result, "operation": config.operation, "timezone": config.timezone}
