"""Cron fire instants across daylight-saving changes: the rule cron daemons use.

A cron expression names local wall-clock times; a DST change makes some local times occur
twice (clocks fall back) and others not at all (clocks spring forward). Railyard follows
Vixie/ISC cron, the cron of Debian, Ubuntu and macOS, from which cronie (RHEL, Fedora)
descends:

- Vixie cron's ``entry.c`` marks an entry *wildcard* when its minute or hour field begins
  with ``*`` (flags ``MIN_STAR``/``HR_STAR``; ``*/5`` counts, ``0,30`` does not), and its
  ``cron.c``, when the clock moves back (the "DST ends" case), runs only the wildcard
  entries for the repeated local times: "The fixed-time jobs probably have already run,
  and should not be repeated." Debian's cron(8) says the same: only jobs that run at a
  particular time (not ``@hourly``, no ``*`` in the hour or minute field) are affected by
  the special handling; wildcard jobs "are run based on the new time immediately".
  Railyard extends the test to its optional seconds field. So a wildcard job matches every
  real instant whose local time matches (``*/15 * * * * *`` keeps firing every 15 real
  seconds through the repeated hour; ``0 * * * *`` fires every real hour, twice at the
  repeated 01:00), while a fixed-time job fires at the first occurrence only.
- A nonexistent local time (spring forward) fires once at the first instant after the gap,
  for every job (as Vixie cron runs skipped fixed-time jobs "soon after the change"); all
  nonexistent times of one gap collapse into that one fire. See
  :func:`connectors.sdk.wallclock.local_to_utc` (the rule the Date & time node follows too).

systemd timers are not the model: they skip the repeated hour even for a minutely timer
(systemd issue #8647, open).

Pure functions over timezone-aware UTC datetimes; no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

#: Offset probes this far apart find the DST changes between two instants; zones change
#: offset at most twice a year, never twice within six hours.
_PROBE = timedelta(hours=6)
_ONE_SECOND = timedelta(seconds=1)
#: Most offset changes crossed looking for one next fire (a year has at most a few).
_MAX_CHANGES = 64


def is_wildcard(expr: str, *, seconds_first: bool) -> bool:
    """True when the cron entry is a *wildcard* job in Vixie cron's sense: its seconds
    (6-field form), minute or hour field begins with ``*``.

    ``expr`` is a validated 5- or 6-field expression (single spaces).
    """
    fields = expr.split(" ")
    timeish = fields[:3] if seconds_first else fields[:2]
    return any(f.startswith("*") for f in timeish)


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset


def first_offset_change(tz: ZoneInfo, start: datetime, end: datetime) -> datetime | None:
    """The first instant in ``(start, end]`` (UTC) whose UTC offset in ``tz`` differs from
    the one at ``start``, to the second; ``None`` when there is none.

    Probes every 6 hours, then bisects the first probe interval that changed.
    """
    base = _offset(tz, start)
    lo = start
    while lo < end:
        hi = min(lo + _PROBE, end)
        if _offset(tz, hi) != base:
            lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp()) + 1
            while hi_s - lo_s > 1:
                mid = (lo_s + hi_s) // 2
                if _offset(tz, datetime.fromtimestamp(mid, UTC)) == base:
                    lo_s = mid
                else:
                    hi_s = mid
            return datetime.fromtimestamp(hi_s, UTC)
        lo = hi
    return None


def next_wildcard_fire(
    expr: str, seconds_first: bool, tz: ZoneInfo, after: datetime
) -> datetime | None:
    """The first fire instant strictly after ``after`` (UTC) of a wildcard cron job.

    Walks the stretches of constant UTC offset: within one, local time maps one-to-one to
    real time, so croniter's next local match is the next fire unless an offset change
    comes first. Crossing a fall-back change, matching continues in the new offset from
    the change on (so repeated local times fire again); crossing a spring-forward change,
    a match inside the gap fires once at the change (the first instant after the gap).
    ``None`` when no fire is found across 64 offset changes.
    """
    start, inclusive = after, False
    for _ in range(_MAX_CHANGES):
        offset = _offset(tz, start)
        local = (start + offset).replace(tzinfo=None, microsecond=0)
        if inclusive:
            local -= _ONE_SECOND  # croniter is strictly-after; cron has 1 s resolution
        match = croniter(expr, local, second_at_beginning=seconds_first).get_next(datetime)
        candidate = (match - offset).replace(tzinfo=UTC)
        change = first_offset_change(tz, start, candidate)
        if change is None:
            return candidate if candidate > after else None
        new_offset = _offset(tz, change)
        if new_offset > offset and match < (change + new_offset).replace(tzinfo=None):
            return change  # the match is a nonexistent local time: first instant after it
        start, inclusive = change, True
    return None
