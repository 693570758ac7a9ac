"""Where one run's latency goes: its phases from PostgreSQL's event stamps.

Every event is stamped with ``clock_timestamp()`` when its statement writes it (see
backend/db/run_writes.py), on the same machine clock as the bench's own ``time.time()``,
so one run can be laid out on one time line:

``sent`` (the client, just before ``start_run`` or the webhook request)
-> ``inserted`` (the run's first event: the insert statement wrote it)
-> ``returned`` (the client, ``start_run`` returned: commit and enqueue; in-process only)
-> ``claimed`` (the first step's ``step.started``: the queue hop to a worker and its claim)
-> ``done`` of each step (its ``step.succeeded``: template, completion statement)
-> ``ended`` (the run's ``run.succeeded`` / ``run.failed``, else the runs row's
``finished_at``) -> ``answered`` (the client read the webhook's answer; webhook only).

:func:`phases` turns one run's :class:`Marks` into the milliseconds between consecutive
marks; :func:`medians` takes the median of each phase over many runs (the medians of the
phases need not add up to the median total). :func:`fetch_marks` reads the stamps.
"""

from __future__ import annotations

import math
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

END_KINDS = ("run.succeeded", "run.failed", "run.cancelled", "run.timed_out")


@dataclass(frozen=True)
class Marks:
    """The moments of one run, as epoch seconds on the machine clock. ``steps`` are
    ``(step id, step.succeeded stamp)`` in the order they completed; ``returned`` and
    ``answered`` are None where the variant has no such moment."""

    sent: float
    inserted: float
    claimed: float
    steps: tuple[tuple[str, float], ...]
    ended: float
    returned: float | None = None
    answered: float | None = None


@dataclass
class Timeline:
    """Medians over runs, in ms: ``phases`` (name -> time since the previous mark) and
    ``at`` (name -> time since ``sent``), both in time-line order; ``runs`` counted."""

    phases: dict[str, float] = field(default_factory=dict)
    at: dict[str, float] = field(default_factory=dict)
    runs: int = 0


def phases(marks: Marks) -> tuple[dict[str, float], dict[str, float]]:
    """``(phases, at)`` of one run in ms, in time-line order.

    Phases: ``insert_statement`` (sent -> inserted), ``start_returned`` (inserted ->
    returned), ``queue_hop`` (returned, else inserted -> claimed), ``step.<id>`` (the
    previous mark -> that step's completion), ``run_end`` (last step -> ended),
    ``answer`` (ended -> answered) and ``total`` (sent -> answered, else ended). ``at``
    has each mark's time since ``sent``: ``inserted``, ``returned``, ``claimed``,
    ``done.<id>``, ``ended``, ``answered``.

    Raises ValueError when the run has no completed step."""
    if not marks.steps:
        raise ValueError("a timeline needs at least one completed step")
    ordered: list[tuple[str, str, float]] = [("insert_statement", "inserted", marks.inserted)]
    if marks.returned is not None:
        ordered.append(("start_returned", "returned", marks.returned))
    ordered.append(("queue_hop", "claimed", marks.claimed))
    ordered += [(f"step.{sid}", f"done.{sid}", at) for sid, at in marks.steps]
    ordered.append(("run_end", "ended", marks.ended))
    if marks.answered is not None:
        ordered.append(("answer", "answered", marks.answered))
    spans: dict[str, float] = {}
    since: dict[str, float] = {}
    previous = marks.sent
    for phase, mark, at in ordered:
        spans[phase] = (at - previous) * 1000
        since[mark] = (at - marks.sent) * 1000
        previous = at
    spans["total"] = (previous - marks.sent) * 1000
    return spans, since


def medians(runs: Sequence[Marks]) -> Timeline:
    """The median of every phase and mark over ``runs`` (a phase some runs lack, e.g. a
    step a run skipped, is the median of the runs that have it). Empty: an empty
    :class:`Timeline`."""
    spans: dict[str, list[float]] = {}
    since: dict[str, list[float]] = {}
    for marks in runs:
        one, at = phases(marks)
        for name, value in one.items():
            spans.setdefault(name, []).append(value)
        for name, value in at.items():
            since.setdefault(name, []).append(value)
    return Timeline(
        phases={k: statistics.median(v) for k, v in spans.items()},
        at={k: statistics.median(v) for k, v in since.items()},
        runs=len(runs),
    )


def marks_from_stamps(
    sent: float,
    events: Sequence[tuple[str, str | None, float]],
    finished_at: float | None,
    *,
    returned: float | None = None,
    answered: float | None = None,
) -> Marks | None:
    """One run's :class:`Marks` from its events ``(kind, step id, epoch seconds)`` in
    write order and its runs row's ``finished_at``: ``inserted`` is the first event,
    ``claimed`` the first ``step.started``, the first ``step.succeeded`` of each claimed
    step a step mark (action steps; the trigger and steps evaluated inline are never
    claimed), ``ended`` the run's end event, else ``finished_at``. None when the run never
    claimed or completed a step, or never ended."""
    if not events:
        return None
    claimed = next((at for kind, _, at in events if kind == "step.started"), None)
    started = {step for kind, step, _ in events if kind == "step.started"}
    steps: dict[str, float] = {}
    for kind, step, at in events:
        if kind == "step.succeeded" and step is not None and step in started:
            steps.setdefault(step, at)
    ended = next((at for kind, _, at in events if kind in END_KINDS), finished_at)
    if claimed is None or not steps or ended is None or math.isnan(ended):
        return None
    return Marks(
        sent=sent,
        inserted=events[0][2],
        claimed=claimed,
        steps=tuple(sorted(steps.items(), key=lambda kv: kv[1])),
        ended=ended,
        returned=returned,
        answered=answered,
    )


async def fetch_stamps(
    dsn: str, run_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[list[tuple[str, str | None, float]], float | None]]:
    """For each of ``run_ids``: its events ``(kind, step id, epoch seconds)`` in write
    order and its ``finished_at`` (epoch seconds, None while running), read with asyncpg
    from the database at ``dsn`` (a plain ``postgresql://`` DSN)."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "select run_id, kind, step_id, extract(epoch from created_at)::float8 from events"
            " where run_id = any($1::uuid[]) order by id",
            list(run_ids),
        )
        ends = await conn.fetch(
            "select id, extract(epoch from finished_at)::float8 from runs"
            " where id = any($1::uuid[])",
            list(run_ids),
        )
    finally:
        await conn.close()
    found: dict[uuid.UUID, tuple[list[tuple[str, str | None, float]], float | None]] = {
        row[0]: ([], row[1]) for row in ends
    }
    for run_id, kind, step, at in rows:
        if run_id in found:
            found[run_id][0].append((kind, step, float(at)))
    return found


def figure_lines(prefix: str, timeline: Timeline) -> list[tuple[str, float]]:
    """``(figure name, ms)`` pairs of ``timeline``: ``<prefix>.<phase>`` for each phase,
    then ``<prefix>.at.<mark>`` for each mark."""
    pairs = [(f"{prefix}.{name}", value) for name, value in timeline.phases.items()]
    pairs += [(f"{prefix}.at.{name}", value) for name, value in timeline.at.items()]
    return pairs
