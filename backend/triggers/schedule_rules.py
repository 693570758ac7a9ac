"""Fire times of schedules: cron, fixed interval and one-off, in an IANA time zone.

Pure functions over timezone-aware UTC datetimes (no I/O); the scheduler
(``backend.services.triggers.schedule_firing``) and the designer's preview use them.

Cron expressions have 5 fields (minute hour day-of-month month day-of-week) or 6 with
**seconds first** (``*/10 * * * * *`` is every ten seconds), evaluated by croniter against
the schedule's local wall-clock time.

The daylight-saving rule (documented in docs/schedules.md):

- A local time that does not exist (clocks jump forward, e.g. 02:30 on a spring-forward
  night in America/Toronto) fires **once at the first valid instant after the gap** (03:00
  local); several nonexistent times in one gap collapse into that one fire.
- A local time that occurs twice (clocks fall back): a *fixed-time* job fires **once, at
  its first occurrence** (the earlier UTC instant); a *wildcard* job (seconds, minute or
  hour field starting with ``*``) fires at **every real instant** whose local time matches,
  so it keeps its real spacing through the repeated hour. This is Vixie/ISC cron's rule;
  sources and details in :mod:`backend.triggers.cron_dst`.
- Fixed intervals count elapsed time (every N seconds from the schedule's anchor), so they
  are unaffected by DST.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from backend.engine.nodes.base import NodeError
from backend.engine.nodes.config import decode_config
from backend.engine.nodes.trigger_schedule import ScheduleConfig
from backend.triggers.cron_dst import is_wildcard, next_wildcard_fire

# the product's one wall-clock rule, shared with the Date & time node (re-exported here)
from connectors.sdk.wallclock import local_to_utc as local_to_utc

_MAX_CRON_STEPS = 100_000
#: Most instants one scheduling pass enumerates for a schedule before jumping ahead.
MAX_ENUMERATED = 5000


class ScheduleError(ValueError):
    """An invalid schedule definition; ``field`` names the config field."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ScheduleSpec:
    """A validated schedule (seconds for ``interval``, ``misfire_grace``, ``catch_up_window``)."""

    mode: str
    tz: ZoneInfo
    cron: str = ""
    seconds_first: bool = False
    interval: float = 0.0
    at: datetime | None = None  # naive local time (mode "once")
    catch_up: str = "skip"
    misfire_grace: float = 60.0
    catch_up_window: float = 3600.0
    enabled: bool = True


def parse_spec(config: Mapping[str, object]) -> ScheduleSpec:
    """Validate a ``trigger.schedule`` config (decoded leniently as stored, into
    :class:`~backend.engine.nodes.trigger_schedule.ScheduleConfig`); raises
    :class:`ScheduleError` naming the field."""
    try:
        given = decode_config(ScheduleConfig, config)
    except NodeError as exc:
        raise ScheduleError(str(exc), exc.field or "mode") from None
    try:
        tz = ZoneInfo(given.timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"unknown time zone {given.timezone!r}", "timezone") from exc
    common = {
        "tz": tz,
        "catch_up": given.catch_up,
        "misfire_grace": float(given.misfire_grace),
        "catch_up_window": float(given.catch_up_window),
        "enabled": given.enabled,
    }
    if given.mode == "cron":
        expr = " ".join((given.cron or "").split())
        fields = expr.split(" ") if expr else []
        if len(fields) not in (5, 6):
            raise ScheduleError("a cron expression has 5 fields, or 6 with seconds first", "cron")
        seconds_first = len(fields) == 6
        if not croniter.is_valid(expr, second_at_beginning=seconds_first):
            raise ScheduleError(f"invalid cron expression {expr!r}", "cron")
        return ScheduleSpec(mode="cron", cron=expr, seconds_first=seconds_first, **common)  # type: ignore[arg-type]
    if given.mode == "interval":
        if given.interval_seconds is None:
            raise ScheduleError("the interval must be at least 1 second", "interval_seconds")
        return ScheduleSpec(mode="interval", interval=float(given.interval_seconds), **common)  # type: ignore[arg-type]
    text = (given.at or "").strip()
    try:
        at = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ScheduleError("at must be a local date and time, YYYY-MM-DDTHH:MM", "at") from exc
    if at.tzinfo is not None:
        at = at.astimezone(tz).replace(tzinfo=None)
    return ScheduleSpec(mode="once", at=at, **common)  # type: ignore[arg-type]


def next_fire(spec: ScheduleSpec, after: datetime, anchor: datetime) -> datetime | None:
    """The first fire instant strictly after ``after`` (UTC), or ``None`` when there is none.

    ``anchor`` (UTC) is where fixed intervals count from.
    """
    if spec.mode == "interval":
        step = timedelta(seconds=spec.interval)
        if after < anchor:
            return anchor
        k = (after - anchor) // step + 1
        return anchor + k * step
    if spec.mode == "once":
        assert spec.at is not None
        at = local_to_utc(spec.at, spec.tz)
        return at if at > after else None
    if is_wildcard(spec.cron, seconds_first=spec.seconds_first):
        return next_wildcard_fire(spec.cron, spec.seconds_first, spec.tz, after)
    local_after = after.astimezone(spec.tz).replace(tzinfo=None, microsecond=0)
    it = croniter(spec.cron, local_after, second_at_beginning=spec.seconds_first)
    for _ in range(_MAX_CRON_STEPS):
        candidate = local_to_utc(it.get_next(datetime), spec.tz)
        if candidate > after:
            return candidate
    return None


def upcoming(
    spec: ScheduleSpec, now: datetime, anchor: datetime, count: int = 10
) -> list[datetime]:
    """The next ``count`` fire instants after ``now`` (UTC)."""
    out: list[datetime] = []
    t: datetime | None = now
    while len(out) < count and t is not None:
        t = next_fire(spec, t, anchor)
        if t is not None:
            out.append(t)
    return out


@dataclass(frozen=True)
class FirePlan:
    """Instants to fire now (``(instant, catch_up)`` pairs) and the next instant after now."""

    fires: list[tuple[datetime, bool]]
    next_fire_at: datetime | None


def plan_fires(
    spec: ScheduleSpec, next_fire_at: datetime, now: datetime, anchor: datetime
) -> FirePlan:
    """Which due instants to fire at ``now``, by the schedule's catch-up policy.

    An instant at most ``misfire_grace`` seconds late fires under every policy. Later ones
    are missed: ``skip`` drops them, ``once`` fires the latest of them, ``all`` fires each
    one at most ``catch_up_window`` seconds late.
    """
    due: list[datetime] = []
    t: datetime | None = next_fire_at
    horizon = now - timedelta(seconds=max(spec.misfire_grace, spec.catch_up_window) + 1)
    while t is not None and t <= now:
        if len(due) >= MAX_ENUMERATED:
            # A long outage of a frequent schedule: only instants within the horizon matter.
            due = []
            t = next_fire(spec, max(horizon, next_fire_at), anchor)
            continue
        due.append(t)
        t = next_fire(spec, t, anchor)
    grace = timedelta(seconds=spec.misfire_grace)
    window = timedelta(seconds=spec.catch_up_window)
    on_time = [(d, False) for d in due if now - d <= grace]
    missed = [d for d in due if now - d > grace]
    chosen: list[tuple[datetime, bool]] = []
    if spec.catch_up == "once" and missed:
        chosen = [(missed[-1], True)]
    elif spec.catch_up == "all":
        chosen = [(d, True) for d in missed if now - d <= window]
    return FirePlan([*chosen, *on_time], t)
