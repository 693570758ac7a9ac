"""Pure parts of the side-by-side harness: per-phase figures and their spread over rounds.

A phase's raw measurements (request latencies, elapsed seconds, CPU seconds, transaction
ids) become :class:`PhaseFigures`; every round adds one value per figure name to a
:class:`Rounds`, which prints ``figure: <engine>.<name> = <min>/<median>/<max> <unit>``.
No I/O besides printing; unit-tested in tests/unit/test_bench_peers.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from bench.common import percentile


def spread(values: list[float]) -> tuple[float, float, float]:
    """``(min, median, max)`` of ``values``; NaNs are left out; all NaN when none remain."""
    kept = [v for v in values if not math.isnan(v)]
    if not kept:
        return (math.nan, math.nan, math.nan)
    return (min(kept), statistics.median(kept), max(kept))


def number(value: float, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits (``nan`` for a missing value); a value
    with more integer digits than that is rounded to an integer (1358, not 1.36e+03)."""
    if math.isnan(value):
        return "nan"
    return f"{value:.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"


def figure_line(engine: str, name: str, values: list[float], unit: str) -> str:
    """The line ``figure: <engine>.<name> = <min>/<median>/<max> <unit>`` over ``values``
    (one value per round)."""
    low, mid, high = spread(values)
    return f"figure: {engine}.{name} = {number(low)}/{number(mid)}/{number(high)} {unit}"


@dataclass
class Rounds:
    """Values of each ``(engine, figure)`` across rounds, in the order first added."""

    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    units: dict[tuple[str, str], str] = field(default_factory=dict)

    def add(self, engine: str, name: str, value: float, unit: str) -> None:
        """Record one round's ``value`` of ``engine.name`` (in ``unit``)."""
        key = (engine, name)
        self.values.setdefault(key, []).append(value)
        self.units[key] = unit

    def lines(self) -> list[str]:
        """One :func:`figure_line` per recorded figure."""
        return [
            figure_line(engine, name, self.values[(engine, name)], self.units[(engine, name)])
            for engine, name in self.values
        ]

    def median(self, engine: str, name: str) -> float:
        """The median over rounds of ``engine.name`` (NaN when never recorded)."""
        return spread(self.values.get((engine, name), []))[1]

    def last(self, engine: str, name: str) -> float:
        """The latest round's ``engine.name`` (NaN when never recorded)."""
        found = self.values.get((engine, name))
        return found[-1] if found else math.nan


def latency_figures(latencies_s: list[float]) -> dict[str, float]:
    """Median and p95 (nearest rank) of request latencies given in seconds, in ms."""
    return {
        "latency_median": percentile(latencies_s, 0.50) * 1000,
        "latency_p95": percentile(latencies_s, 0.95) * 1000,
        "latency_p99": percentile(latencies_s, 0.99) * 1000,
    }


def per_run(total: float, runs: int, scale: float = 1.0) -> float:
    """``total * scale / runs``; NaN when no run completed."""
    return total * scale / runs if runs > 0 else math.nan


def write_transactions(xid_before: int, xid_after: int) -> int:
    """Write transactions between two ``pg_current_xact_id()`` readings: the difference less
    the one id the later reading took itself (only writing transactions are given ids)."""
    return max(0, xid_after - xid_before - 1)


def ceiling_share(runs_per_s: float, xacts_per_run: float, pgbench_tps: float) -> float:
    """Percent of PostgreSQL's commit ceiling an engine used: its write transactions per
    second (``runs_per_s * xacts_per_run``) over ``pgbench -N``'s transactions per second."""
    if not pgbench_tps or math.isnan(pgbench_tps):
        return math.nan
    return runs_per_s * xacts_per_run / pgbench_tps * 100


def ff_rates(
    accepted: int, send_seconds: float, ended: int, started_at: float, last_end: float
) -> dict[str, float]:
    """Figures of one fire-and-forget phase: ``accepted`` starts answered in
    ``send_seconds``; ``ended`` of them finished, the latest at epoch ``last_end``, the load
    having begun at epoch ``started_at``.

    ``accepted_per_s`` = accepted / send_seconds; ``completed_per_s`` = ended / (last_end -
    started_at) (NaN when none ended); ``not_completed`` = accepted - ended."""
    span = last_end - started_at
    return {
        "accepted_per_s": accepted / send_seconds if send_seconds > 0 else math.nan,
        "completed_per_s": ended / span if ended > 0 and span > 0 else math.nan,
        "not_completed": float(accepted - ended),
    }


GOALS = (
    ("waiting: runs/s", "runs_per_s_{runs}", ">=", 1.2),
    ("waiting: latency median", "latency_median", "<=", 0.8),
    ("fire-and-forget: completed runs/s", "ff_runs_per_s_{ff_runs}", ">=", 1.2),
    ("fire-and-forget: accepted starts/s", "ff_accepted_per_s_{ff_runs}", ">=", 1.2),
    ("fire-and-forget: start answer median", "ff_accept_median_{ff_runs}", "<=", 0.8),
)
"""The goals of Railyard against Restate: figure, how the ratio must compare, the bound."""


def goal_table(out: Rounds, runs: int, ff_runs: int, peer: str = "restate") -> list[str]:
    """Railyard against ``peer`` on the medians over rounds: one row per goal of
    :data:`GOALS` with both figures, their ratio and whether the goal is met."""
    lines = [
        f"| goal (Railyard vs {peer}) | Railyard | {peer} | ratio | bound | met |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for label, template, compare, bound in GOALS:
        key = template.format(runs=runs, ff_runs=ff_runs)
        ours, theirs = out.median("railyard", key), out.median(peer, key)
        ratio = ours / theirs if theirs and not math.isnan(theirs) else math.nan
        met = (
            "n/a"
            if math.isnan(ratio)
            else "yes"
            if (ratio >= bound if compare == ">=" else ratio <= bound)
            else "no"
        )
        lines.append(
            f"| {label} | {number(ours, 3)} | {number(theirs, 3)} | {number(ratio, 3)}x "
            f"| {compare} {bound}x | {met} |"
        )
    return lines


def intake_table(out: Rounds, runs: int, peer: str = "restate") -> list[str]:
    """Railyard's intake ceiling (its accepted starts/s with its workers frozen,
    bench/peers/fire_and_forget.py's ``intake``) beside its accepted starts/s while it
    executes and ``peer``'s (while ``peer`` executes), medians over rounds, with the ratio
    of each to ``peer``'s accepted starts/s and the CPU per start of Railyard's API and of
    PostgreSQL in the intake phase."""
    theirs = out.median(peer, f"ff_accepted_per_s_{runs}")

    def row(label: str, rate: float, median: float, cpu: str) -> str:
        ratio = rate / theirs if theirs and not math.isnan(theirs) else math.nan
        return (
            f"| {label} | {number(rate, 3)} | {number(ratio, 3)}x "
            f"| {number(median, 3)} ms | {cpu} |"
        )

    api = out.median("railyard", f"intake_cpu_per_start_api_{runs}")
    pg = out.median("railyard", f"intake_cpu_per_start_postgres_{runs}")
    return [
        f"| accepting {runs:,} starts | starts/s | vs {peer} executing "
        "| answer median | CPU per start (API + PG) |",
        "| --- | --- | --- | --- | --- |",
        row(
            "Railyard, workers frozen (intake alone)",
            out.median("railyard", f"intake_accepted_per_s_{runs}"),
            out.median("railyard", f"intake_accept_median_{runs}"),
            f"{number(api, 3)} ms + {number(pg, 3)} ms",
        ),
        row(
            "Railyard, executing",
            out.median("railyard", f"ff_accepted_per_s_{runs}"),
            out.median("railyard", f"ff_accept_median_{runs}"),
            "",
        ),
        row(
            f"{peer}, executing",
            theirs,
            out.median(peer, f"ff_accept_median_{runs}"),
            "",
        ),
    ]


def ff_table(out: Rounds, engines: list[str], runs: int) -> list[str]:
    """The fire-and-forget shape's table from the medians over rounds: one row per engine
    (accepted starts/s, completed runs/s, the start's answer median / p95, CPU per run,
    runs not completed)."""
    lines = [
        f"| engine | accepted starts/s ({runs:,} runs) | completed runs/s "
        "| start answer median / p95 | CPU per run (engine + PG) | not completed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for engine in engines:

        def med(name: str, engine: str = engine) -> str:
            return number(out.median(engine, f"{name}_{runs}"), 3)

        lines.append(
            f"| {engine} | {med('ff_accepted_per_s')} | {med('ff_runs_per_s')} "
            f"| {med('ff_accept_median')} ms / {med('ff_accept_p95')} ms "
            f"| {med('ff_cpu_per_run')} ms | {med('ff_not_completed')} |"
        )
    return lines


def markdown_table(out: Rounds, engines: list[str], runs: int) -> list[str]:
    """The issue's table from the medians over rounds: one row per engine (latency median /
    p95, runs/s of the ``runs``-run phase, CPU per run with PostgreSQL's share, PostgreSQL
    write transactions per run), then the pgbench ceiling."""
    lines = [
        f"| engine | latency median / p95 | runs/s ({runs:,} runs) | CPU per run (engine + PG) "
        "| PG write txns per run |",
        "| --- | --- | --- | --- | --- |",
    ]
    for engine in engines:
        med = {name: out.median(engine, name) for (e, name) in out.values if e == engine}
        cpu = number(med.get("engine_cpu_per_run", math.nan), 3) + " ms"
        if "pg_cpu_per_run" in med:
            cpu += f" + {number(med['pg_cpu_per_run'], 3)} ms"
        xacts = med.get("pg_write_xacts_per_run", math.nan)
        latency = (
            f"{number(med.get('latency_median', math.nan), 3)} ms"
            f" / {number(med.get('latency_p95', math.nan), 3)} ms"
        )
        rate = number(med.get(f"runs_per_s_{runs}", math.nan), 3)
        pg = "(own log)" if math.isnan(xacts) else number(xacts, 3)
        lines.append(f"| {engine} | {latency} | {rate} | {cpu} | {pg} |")
    tps = out.median("postgres", "pgbench_N_8_clients")
    lines.append(f"| PostgreSQL ceiling: pgbench -N, 8 clients | | {number(tps, 4)} tps | | |")
    return lines
