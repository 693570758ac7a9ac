"""Fire-time rules: cron with and without seconds, intervals, one-offs, DST in several zones."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from backend.triggers.cron_dst import is_wildcard
from backend.triggers.schedule_rules import (
    ScheduleError,
    local_to_utc,
    next_fire,
    parse_spec,
    plan_fires,
    upcoming,
)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


ANCHOR = utc(2020, 1, 1)


def fires(config: dict[str, object], start: datetime, end: datetime) -> list[datetime]:
    spec = parse_spec(config)
    out: list[datetime] = []
    t = next_fire(spec, start - timedelta(microseconds=1), ANCHOR)
    while t is not None and t <= end:
        out.append(t)
        t = next_fire(spec, t, ANCHOR)
    return out


def test_toronto_spring_forward_nonexistent_time_fires_once_after_the_gap() -> None:
    got = fires(
        {"cron": "0 */2 * * *", "timezone": "America/Toronto"},
        utc(2023, 3, 12, 5),
        utc(2023, 3, 12, 12),
    )
    # 00:00 EST, (02:00 does not exist -> 03:00 EDT), 04:00, 06:00, 08:00 EDT
    assert got == [
        utc(2023, 3, 12, 5),
        utc(2023, 3, 12, 7),
        utc(2023, 3, 12, 8),
        utc(2023, 3, 12, 10),
        utc(2023, 3, 12, 12),
    ]


def test_times_inside_one_gap_collapse_into_one_fire() -> None:
    got = fires(
        {"cron": "*/15 2 * * *", "timezone": "America/Toronto"},
        utc(2023, 3, 12, 0),
        utc(2023, 3, 12, 12),
    )
    assert got == [utc(2023, 3, 12, 7)]


def test_berlin_fall_back_repeated_time_fires_at_first_occurrence_only() -> None:
    got = fires(
        {"cron": "30 2 * * *", "timezone": "Europe/Berlin"},
        utc(2023, 10, 28, 12),
        utc(2023, 10, 30, 12),
    )
    # 29 Oct 02:30 happens at 00:30Z (CEST) and 01:30Z (CET): only the first fires.
    assert got == [utc(2023, 10, 29, 0, 30), utc(2023, 10, 30, 1, 30)]


def test_sydney_spring_forward_and_fall_back() -> None:
    spring = fires(
        {"cron": "30 2 * * *", "timezone": "Australia/Sydney"},
        utc(2023, 9, 30, 0),
        utc(2023, 10, 1, 23),
    )
    assert spring == [utc(2023, 9, 30, 16), utc(2023, 10, 1, 15, 30)]
    fall = fires(
        {"cron": "0 * * * *", "timezone": "Australia/Sydney"},
        utc(2024, 4, 6, 14),
        utc(2024, 4, 6, 17),
    )
    # 7 Apr 03:00 AEDT -> 02:00 AEST at 16:00Z: hourly is a wildcard job (hour field `*`),
    # so it fires every real hour, at both 02:00s (15:00Z and 16:00Z), as Vixie cron does.
    assert fall == [utc(2024, 4, 6, h) for h in (14, 15, 16, 17)]
    fixed = fires(
        {"cron": "0 2 * * *", "timezone": "Australia/Sydney"},
        utc(2024, 4, 6, 0),
        utc(2024, 4, 7, 0),
    )
    assert fixed == [utc(2024, 4, 6, 15)]  # a fixed-time job: first occurrence only


LONDON_FALL_BACK = (utc(2025, 10, 26, 0, 58), utc(2025, 10, 26, 2, 2))  # 01:00-02:00 twice


def test_london_fall_back_seconds_cron_keeps_real_spacing() -> None:
    got = fires({"cron": "*/15 * * * * *", "timezone": "Europe/London"}, *LONDON_FALL_BACK)
    assert len(got) == 64 * 4 + 1
    assert {b - a for a, b in itertools.pairwise(got)} == {timedelta(seconds=15)}


def test_london_fall_back_every_five_minutes_keeps_real_spacing() -> None:
    got = fires({"cron": "*/5 * * * *", "timezone": "Europe/London"}, *LONDON_FALL_BACK)
    assert got == [utc(2025, 10, 26, 1) + timedelta(minutes=5 * i) for i in range(13)]


def test_london_fall_back_fixed_time_fires_once_that_night() -> None:
    got = fires(
        {"cron": "30 1 * * *", "timezone": "Europe/London"},
        utc(2025, 10, 25, 12),
        utc(2025, 10, 26, 12),
    )
    assert got == [utc(2025, 10, 26, 0, 30)]  # 01:30 BST; 01:30 GMT (01:30Z) does not fire


@pytest.mark.parametrize(
    ("expr", "wildcard"),
    [
        ("*/15 * * * * *", True),
        ("0 */5 * * * *", True),
        ("0 0 * * * *", True),
        ("0 0 3 * * *", False),
        ("*/5 * * * *", True),
        ("0 * * * *", True),
        ("0,30 1 * * *", False),
        ("0-59 2 * * *", False),
        ("30 1 * * *", False),
    ],
)
def test_wildcard_jobs_as_vixie_cron_classifies_them(expr: str, wildcard: bool) -> None:
    assert is_wildcard(expr, seconds_first=len(expr.split()) == 6) is wildcard


def test_zone_without_dst_is_a_fixed_offset() -> None:
    got = fires({"cron": "0 9 * * *", "timezone": "Asia/Tokyo"}, utc(2023, 3, 10), utc(2023, 3, 14))
    assert got == [utc(2023, 3, d, 0) for d in (10, 11, 12, 13, 14)]


def test_six_fields_means_seconds_first() -> None:
    got = fires({"cron": "*/20 * * * * *"}, utc(2024, 1, 1), utc(2024, 1, 1, 0, 1))
    assert got == [
        utc(2024, 1, 1, 0, 0, 0),
        utc(2024, 1, 1, 0, 0, 20),
        utc(2024, 1, 1, 0, 0, 40),
        utc(2024, 1, 1, 0, 1, 0),
    ]


def test_interval_counts_elapsed_time_through_dst() -> None:
    spec = parse_spec({"mode": "interval", "interval_seconds": 3600, "timezone": "Europe/Berlin"})
    anchor = utc(2023, 3, 25, 22, 17)
    got = upcoming(spec, anchor, anchor, 5)
    assert [b - a for a, b in zip([anchor, *got], got, strict=False)] == [timedelta(hours=1)] * 5


def test_once_in_a_zone_and_never_again() -> None:
    spec = parse_spec({"mode": "once", "at": "2024-07-01T09:00", "timezone": "Europe/Berlin"})
    assert next_fire(spec, utc(2024, 1, 1), ANCHOR) == utc(2024, 7, 1, 7)
    assert next_fire(spec, utc(2024, 7, 1, 7), ANCHOR) is None


def test_local_to_utc_gap_and_fold() -> None:
    from zoneinfo import ZoneInfo

    tz = ZoneInfo("America/Toronto")
    assert local_to_utc(datetime(2023, 3, 12, 2, 30), tz) == utc(2023, 3, 12, 7)
    assert local_to_utc(datetime(2023, 11, 5, 1, 30), tz) == utc(2023, 11, 5, 5, 30)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"cron": "* * *"}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * * * *", "timezone": "Mars/Base"}, "timezone"),
        ({"mode": "interval", "interval_seconds": 0}, "interval_seconds"),
        ({"mode": "once", "at": "tomorrow"}, "at"),
        ({"mode": "weekly"}, "mode"),
        ({"cron": "* * * * *", "catch_up": "maybe"}, "catch_up"),
    ],
)
def test_invalid_definitions_name_the_field(config: dict[str, object], field: str) -> None:
    with pytest.raises(ScheduleError) as err:
        parse_spec(config)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("skip", 1), ("once", 2), ("all", 11)],
)
def test_catch_up_policies(policy: str, expected: int) -> None:
    # every minute; down from 10:00 to 10:10:30, then catching up
    spec = parse_spec({"cron": "* * * * *", "catch_up": policy, "misfire_grace": 60})
    plan = plan_fires(spec, utc(2024, 1, 1, 10), utc(2024, 1, 1, 10, 10, 30), ANCHOR)
    assert len(plan.fires) == expected
    assert plan.fires[-1] == (utc(2024, 1, 1, 10, 10), False)  # on time
    assert plan.next_fire_at == utc(2024, 1, 1, 10, 11)


def test_catch_up_all_respects_the_window() -> None:
    spec = parse_spec({"cron": "* * * * *", "catch_up": "all", "catch_up_window": 300})
    plan = plan_fires(spec, utc(2024, 1, 1, 8), utc(2024, 1, 1, 10, 0, 30), ANCHOR)
    assert plan.fires[0][0] == utc(2024, 1, 1, 9, 56)
    assert len(plan.fires) == 5
