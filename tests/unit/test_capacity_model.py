"""The arithmetic of the capacity model (bench/capacity.py) on small, exact numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.capacity import (
    Capacity,
    Costs,
    Scenario,
    first_wall,
    load_costs,
    needed,
    size,
    unit_limits,
    units_for,
)

COSTS = Costs(
    api_cpu_ms_per_start=2.0,
    worker_cpu_ms_per_start=0.0,
    worker_cpu_ms_per_step=5.0,
    pg_cpu_ms_per_start=1.0,
    pg_cpu_ms_per_step=1.0,
    pg_commits_per_start=1.0,
    pg_commits_per_step=2.0,
    wal_bytes_per_start=1000.0,
    wal_bytes_per_step=500.0,
    redis_calls_per_start=3.0,
    redis_calls_per_step=1.0,
)
CAP = Capacity(
    utilization=0.5,
    pg_commits=1000.0,
    pg_wal_bytes=1e6,
    pg_cores=4.0,
    redis_calls=3000.0,
    max_jobs=10,
    step_seconds=0.1,
)


def test_capacity_model_sizes_each_component() -> None:
    sizings = size(COSTS, Scenario("t", 1000, 2000, 0), CAP)
    every = {(s.component, s.resource): s.units for s in sizings}
    assert every == {
        ("api", "cpu"): 4,
        ("worker", "cpu"): 20,
        ("worker", "slots"): 40,
        ("postgresql", "commits"): 10,
        ("postgresql", "wal"): 4,
        ("postgresql", "cpu"): 2,
        ("redis", "commands"): 4,
    }
    found = needed(sizings)
    # 2 ms x 1000 starts/s = 2 cores; half-full processes -> 4
    api = found["api"]
    assert (api.demand, api.units, api.headroom) == (2.0, 4, 1.0)
    # CPU asks 10 cores -> 20 processes, but 2000 steps/s x 0.1 s = 200 in flight over
    # 10 slots half full -> 40 processes: slots win
    workers = found["worker"]
    assert (workers.demand, workers.units, workers.headroom) == (200.0, 40, 1.0)
    # commits 1000 + 4000 = 5000/s over 500 usable per primary -> 10 (WAL asks 4, CPU 2)
    pg = found["postgresql"]
    assert (pg.demand, pg.units, pg.headroom) == (5000.0, 10, 1.0)
    # 3000 + 2000 = 5000 commands/s over 1500 usable per shard -> 4 shards, 12,000 in all
    redis = found["redis"]
    assert (redis.demand, redis.units) == (5000.0, 4)
    assert redis.headroom == pytest.approx(1.4)


def test_capacity_model_first_wall_is_the_unit_that_runs_out_first() -> None:
    # per start with 2 steps: 5 commits (1000/5 = 200 starts/s), 2000 B of WAL (500),
    # 3 ms of PostgreSQL CPU (4 cores: 1333), 5 Redis commands (600)
    assert unit_limits(COSTS, CAP, 2) == pytest.approx(
        {
            "PostgreSQL commits": 200.0,
            "PostgreSQL WAL": 500.0,
            "PostgreSQL CPU": 4000 / 3,
            "Redis commands": 600.0,
        }
    )
    assert first_wall(COSTS, CAP, 2) == ("PostgreSQL commits", 200.0)


def test_capacity_model_units_for_edges() -> None:
    assert units_for(0, 1, 0.5) == 1
    assert units_for(1.5, 1, 0.5) == 3
    with pytest.raises(ValueError, match="positive"):
        units_for(1, 0, 0.5)


def test_capacity_model_reads_costs_written_by_the_scale_benchmark(tmp_path: Path) -> None:
    path = tmp_path / "scale.json"
    path.write_text(json.dumps({"configs": [], "costs": COSTS.__dict__}))
    assert load_costs(path) == COSTS
