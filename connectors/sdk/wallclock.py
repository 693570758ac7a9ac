"""Local wall-clock times across daylight-saving changes: one rule for the whole product.

A DST change makes some local times occur twice (clocks fall back) and others not at all
(clocks spring forward). Railyard's rule, shared by the scheduler
(backend/triggers/schedule_rules.py) and the Date & time node (connectors/builtin/data.py):

- a repeated local time means its **first** occurrence (zoneinfo's ``fold=0``, PEP 495);
- a nonexistent local time means the **first instant after the gap** (02:30 on the night
  clocks jump from 02:00 to 03:00 is 03:00), as Vixie cron runs the jobs a gap skipped
  "soon after the change".

Calendar arithmetic (:func:`add_local_days`) moves the wall clock and then applies the
rule; hours and minutes are elapsed time, so adding them never lands in a gap.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

__all__ = ["add_local_days", "local_to_utc"]


def local_to_utc(naive: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant of the local wall time ``naive`` (no tzinfo) in ``tz``, by the rule
    above."""
    first = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == naive:
        return first  # exists; for a repeated time fold=0 is the first occurrence
    # Nonexistent: the transition lies between the two readings; find its first instant.
    second = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    lo, hi = sorted((first, second))
    after_offset = hi.astimezone(tz).utcoffset()
    lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp())
    while lo_s < hi_s:
        mid = (lo_s + hi_s) // 2
        if datetime.fromtimestamp(mid, UTC).astimezone(tz).utcoffset() == after_offset:
            hi_s = mid
        else:
            lo_s = mid + 1
    return datetime.fromtimestamp(hi_s, UTC)


def add_local_days(moment: datetime, days: float, tz: ZoneInfo) -> datetime:
    """``moment`` (aware) moved by ``days`` calendar days on ``tz``'s wall clock (12:00
    stays 12:00 across a DST change; a fraction of a day is elapsed time), resolved by the
    rule above; returns an aware UTC datetime."""
    whole = int(days)
    local = moment.astimezone(tz).replace(tzinfo=None) + timedelta(days=whole)
    return local_to_utc(local, tz) + timedelta(days=days - whole)
