"""Capacity model: the cluster Railyard needs for the product targets, from per-run costs.

Run from the repository root: ``python bench/capacity.py`` (the costs measured by
``bench/scale.py`` on one machine as defaults), ``--costs scale.json`` (the file
``bench/scale.py --json scale.json`` writes), or single costs and capacities overridden by
flags (``--help``). Prints, per scenario, ``figure:`` lines with the demand on each
component, the units it needs and their headroom, then the ``first wall``: the component
whose single unit runs out at the lowest start rate. docs/scaling.md explains the model.

The model (every rate per second):

- demand = starts x cost per start + action steps x cost per action step, for API CPU,
  worker CPU, PostgreSQL commits, WAL bytes and CPU, Redis commands;
- a horizontally scaled component (API, worker process; PostgreSQL cluster; Redis shard)
  needs ``ceil(demand / (unit capacity x target utilization))`` units; a Python process is
  one core at most (one event loop);
- worker processes are also bounded by slots: steps in flight = action steps/s x mean step
  duration (Little's law, L = lambda W), each worker runs ``max_jobs`` at once;
- headroom = units x unit capacity / demand - 1 (the fraction the load may still grow).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import figure


@dataclass(frozen=True)
class Costs:
    """Resources one run start and one action step cost: CPU in milliseconds of one core,
    commits and Redis commands as counts, WAL in bytes. A start is a webhook request that
    creates a run and evaluates its inline flow steps (Set, If) in the API; an action step
    is one HTTP Request step run by a worker (claim, call, complete)."""

    api_cpu_ms_per_start: float
    worker_cpu_ms_per_start: float
    worker_cpu_ms_per_step: float
    pg_cpu_ms_per_start: float
    pg_cpu_ms_per_step: float
    pg_commits_per_start: float
    pg_commits_per_step: float
    wal_bytes_per_start: float
    wal_bytes_per_step: float
    redis_calls_per_start: float
    redis_calls_per_step: float


MEASURED = Costs(
    # bench/scale.py on 2 quiet cores, medians over its six configurations (docs/scaling.md,
    # "Measured costs")
    api_cpu_ms_per_start=0.615,
    worker_cpu_ms_per_start=0.0,
    worker_cpu_ms_per_step=3.19,
    pg_cpu_ms_per_start=0.37,
    pg_cpu_ms_per_step=1.64,
    pg_commits_per_start=0.24,
    pg_commits_per_step=1.38,
    wal_bytes_per_start=6070.0,
    wal_bytes_per_step=4750.0,
    redis_calls_per_start=0.0,
    redis_calls_per_step=4.4,
)
"""Default costs: the figures measured by bench/scale.py (replace with ``--costs``)."""


@dataclass(frozen=True)
class Capacity:
    """What one unit of each component gives, and how full it may run.

    ``utilization`` (0..1) is the planned ceiling of every unit (room for peaks inside a
    scenario, failover and noisy neighbours). ``pg_commits`` (commits/s), ``pg_wal_bytes``
    (bytes/s shipped to replicas and the archive) and ``pg_cores`` describe one PostgreSQL
    primary; ``redis_calls`` commands/s of one Redis shard (one thread); ``max_jobs`` the
    steps one worker process runs at once; ``step_seconds`` the mean duration of an action
    step (mostly waiting for the remote API)."""

    utilization: float = 0.6
    pg_commits: float = 30_000.0
    pg_wal_bytes: float = 200e6
    pg_cores: float = 32.0
    redis_calls: float = 100_000.0
    max_jobs: int = 20
    step_seconds: float = 0.2


@dataclass(frozen=True)
class Scenario:
    """A load to size for: run ``starts`` and action ``steps`` per second, and
    ``concurrent_runs`` runs not yet ended at any moment."""

    name: str
    starts: float
    steps: float
    concurrent_runs: float


SCENARIOS = (
    # the product brief's targets: 10,000 starts/s on average with 100,000 steps/s (ten
    # action steps per run); peaks of 100,000 starts/s are accepted and stored at once while
    # the workers keep the sustained step rate (the backlog waits as ready steps)
    Scenario("average", 10_000, 100_000, 50_000),
    Scenario("peak", 100_000, 100_000, 50_000),
)


@dataclass(frozen=True)
class Sizing:
    """What one resource of a component asks for: ``demand`` (in ``unit``), the units of
    ``component`` it needs and their headroom (the fraction the load may still grow by).
    A component needs the most units any of its resources asks for."""

    component: str
    resource: str
    demand: float
    unit: str
    units: int
    headroom: float


def units_for(demand: float, per_unit: float, utilization: float) -> int:
    """Units of ``per_unit`` capacity, each run at most ``utilization`` full, that carry
    ``demand`` (at least one). Raises ValueError for a non-positive capacity."""
    if per_unit <= 0 or utilization <= 0:
        raise ValueError("unit capacity and utilization must be positive")
    return max(1, math.ceil(demand / (per_unit * utilization) - 1e-9))


def sized(
    component: str, resource: str, demand: float, unit: str, per_unit: float, cap: Capacity
) -> Sizing:
    """The :class:`Sizing` of ``component``'s ``resource`` for ``demand`` on units of
    ``per_unit``."""
    units = units_for(demand, per_unit, cap.utilization)
    headroom = math.inf if demand <= 0 else units * per_unit / demand - 1
    return Sizing(component, resource, demand, unit, units, headroom)


def needed(sizings: list[Sizing]) -> dict[str, Sizing]:
    """Per component, the sizing of the resource that asks for the most units."""
    found: dict[str, Sizing] = {}
    for s in sizings:
        if s.component not in found or s.units > found[s.component].units:
            found[s.component] = s
    return found


def size(costs: Costs, scenario: Scenario, cap: Capacity) -> list[Sizing]:
    """What ``scenario`` asks of each resource: API processes (CPU), worker processes (CPU,
    slots), PostgreSQL primaries, i.e. partitions (commits, WAL, CPU), Redis shards
    (commands). :func:`needed` picks each component's size."""
    starts, steps = scenario.starts, scenario.steps

    def rate(per_start: float, per_step: float) -> float:
        return starts * per_start + steps * per_step

    api_cores = rate(costs.api_cpu_ms_per_start, 0) / 1000
    worker_cores = rate(costs.worker_cpu_ms_per_start, costs.worker_cpu_ms_per_step) / 1000
    in_flight = steps * cap.step_seconds  # Little's law
    commits = rate(costs.pg_commits_per_start, costs.pg_commits_per_step)
    wal = rate(costs.wal_bytes_per_start, costs.wal_bytes_per_step)
    pg_cores = rate(costs.pg_cpu_ms_per_start, costs.pg_cpu_ms_per_step) / 1000
    redis = rate(costs.redis_calls_per_start, costs.redis_calls_per_step)

    return [
        sized("api", "cpu", api_cores, "cores", 1.0, cap),
        sized("worker", "cpu", worker_cores, "cores", 1.0, cap),
        sized("worker", "slots", in_flight, "steps in flight", cap.max_jobs, cap),
        sized("postgresql", "commits", commits, "commits/s", cap.pg_commits, cap),
        sized("postgresql", "wal", wal, "B/s", cap.pg_wal_bytes, cap),
        sized("postgresql", "cpu", pg_cores, "cores", cap.pg_cores, cap),
        sized("redis", "commands", redis, "commands/s", cap.redis_calls, cap),
    ]


def unit_limits(costs: Costs, cap: Capacity, steps_per_start: float) -> dict[str, float]:
    """Starts/s one PostgreSQL primary (by commits, WAL, CPU) and one Redis shard carry at
    full capacity, with ``steps_per_start`` action steps per run. API and worker processes
    are left out: they are stateless and scale by adding processes."""
    per_start = {
        "PostgreSQL commits": (
            costs.pg_commits_per_start + steps_per_start * costs.pg_commits_per_step,
            cap.pg_commits,
        ),
        "PostgreSQL WAL": (
            costs.wal_bytes_per_start + steps_per_start * costs.wal_bytes_per_step,
            cap.pg_wal_bytes,
        ),
        "PostgreSQL CPU": (
            (costs.pg_cpu_ms_per_start + steps_per_start * costs.pg_cpu_ms_per_step) / 1000,
            cap.pg_cores,
        ),
        "Redis commands": (
            costs.redis_calls_per_start + steps_per_start * costs.redis_calls_per_step,
            cap.redis_calls,
        ),
    }
    return {name: capacity / need for name, (need, capacity) in per_start.items() if need > 0}


def first_wall(costs: Costs, cap: Capacity, steps_per_start: float) -> tuple[str, float]:
    """The single unit that runs out first as load grows: ``(resource, starts/s)``, the
    lowest of :func:`unit_limits`."""
    limits = unit_limits(costs, cap, steps_per_start)
    name = min(limits, key=limits.__getitem__)
    return name, limits[name]


UNITS = {
    "api": "processes",
    "worker": "processes",
    "postgresql": "primaries",
    "redis": "shards",
}


def slug(text: str) -> str:
    """``text`` as a figure name part: lower case, words joined by ``_``."""
    return "_".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def report(costs: Costs, cap: Capacity, scenarios: tuple[Scenario, ...]) -> None:
    """Print the figures of every scenario and the first wall."""
    for scenario in scenarios:
        print(
            f"# {scenario.name}: {scenario.starts:,.0f} starts/s, {scenario.steps:,.0f} action"
            f" steps/s, {scenario.concurrent_runs:,.0f} concurrent runs",
            flush=True,
        )
        sizings = size(costs, scenario, cap)
        for s in sizings:
            name = f"{scenario.name}_{s.component}_{s.resource}"
            figure(f"{name}_demand", s.demand, s.unit)
            figure(f"{name}_units", s.units, "units")
        for component, s in needed(sizings).items():
            name = f"{scenario.name}_{component}"
            figure(f"{name}_units", s.units, UNITS[component])
            figure(f"{name}_headroom", s.headroom * 100, "%", digits=3)
            print(f"# {name}: {s.units} {UNITS[component]}, bound by {s.resource}", flush=True)
        in_flight = scenario.steps * cap.step_seconds
        figure(f"{scenario.name}_steps_in_flight", in_flight, "steps")
        waiting = max(0.0, scenario.concurrent_runs - in_flight)
        figure(f"{scenario.name}_runs_waiting_in_postgresql", waiting, "runs")
    ratio = SCENARIOS[0].steps / SCENARIOS[0].starts
    for name, starts in unit_limits(costs, cap, ratio).items():
        figure(f"one_unit_{slug(name)}_starts", starts, "starts/s")
    name, starts = first_wall(costs, cap, ratio)
    print(f"first wall: {name}: one unit carries {starts:,.0f} starts/s at {ratio:g} steps/run")


def load_costs(path: Path | None) -> Costs:
    """:data:`MEASURED`, or the ``costs`` object of a bench/scale.py JSON file.

    Raises KeyError when the file has no ``costs``, TypeError on unknown cost names."""
    if path is None:
        return MEASURED
    return Costs(**json.loads(path.read_text())["costs"])


def main(argv: list[str] | None = None) -> int:
    """Parse flags, run the model, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--costs", type=Path, help="JSON file written by bench/scale.py --json")
    for f in fields(Costs):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=float, dest=f.name)
    for f in fields(Capacity):
        parser.add_argument(f"--cap-{f.name.replace('_', '-')}", type=float, dest=f"cap_{f.name}")
    args = parser.parse_args(argv)
    costs = load_costs(args.costs)
    costs = replace(costs, **{k: v for k in asdict(costs) if (v := getattr(args, k)) is not None})
    overrides = {
        f.name: type(getattr(Capacity(), f.name))(v)
        for f in fields(Capacity)
        if (v := getattr(args, f"cap_{f.name}")) is not None
    }
    cap = Capacity(**overrides)
    print(f"# costs: {asdict(costs)}", flush=True)
    print(f"# capacity per unit: {asdict(cap)}", flush=True)
    report(costs, cap, SCENARIOS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
