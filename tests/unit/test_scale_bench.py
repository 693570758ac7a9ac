"""The pure parts of bench/scale.py: naming the bottleneck and deriving the model's costs."""

from __future__ import annotations

from typing import Any

import pytest

from bench.cluster import Cost
from bench.scale import bottleneck, derive_costs, parse_configs


def cost(*, worker: float, machine: float, commits: int) -> Cost:
    """Ten seconds with two workers and one API on a 2-core machine."""
    return Cost(
        wall=10.0,
        cpu={"worker": 2 * worker, "api": 1.0, "generator": 0.5, "pg": 2.0, "redis": 0.2},
        cpu_max={"worker": worker, "api": 1.0, "generator": 0.5, "pg": 1.0, "redis": 0.2},
        processes={"worker": 2, "api": 1, "generator": 1},
        machine_cores=machine,
        cores=2,
        commits=commits,
        writes=commits,
        wal_bytes=0,
        redis_calls=0,
    )


def test_scale_bottleneck_names_a_worker_using_its_whole_core() -> None:
    name, evidence = bottleneck(cost(worker=9.8, machine=1.6, commits=1000), 10.0, 1000.0)
    assert name == "worker CPU"
    assert evidence.startswith("worker CPU 98% (")
    assert "worker CPU 98% of a core x2" in evidence
    assert "PG 100 commits/s = 10% of pgbench ceiling" in evidence


def test_scale_bottleneck_names_the_machine_when_its_cores_are_all_busy() -> None:
    name, evidence = bottleneck(cost(worker=3.0, machine=2.0, commits=1000), 10.0, 1000.0)
    assert name == "machine CPU"
    assert "more processes cannot add CPU here" in evidence
    assert "machine 2.00 of 2 cores busy, 0.97 of them this benchmark's processes" in evidence


def test_scale_bottleneck_names_postgresql_at_its_commit_ceiling() -> None:
    name, _ = bottleneck(cost(worker=3.0, machine=1.0, commits=9900), 10.0, 1000.0)
    assert name == "PostgreSQL commits"


def result(workload: str, api: float, worker: float, commits: float) -> dict[str, Any]:
    return {
        "workload": workload,
        "cpu_ms_per_run": {"api": api, "worker": worker, "pg": 1.0},
        "commits_per_run": commits,
        "wal_bytes_per_run": 1000.0,
        "redis_net_calls_per_run": 2.0,
    }


def test_scale_derive_costs_charges_action_steps_what_action3_costs_beyond_a_start() -> None:
    results = [
        result("webhook", 2.0, 0.0, 1.0),
        result("webhook", 4.0, 1.0, 1.0),
        result("action3", 3.0, 12.0, 5.0),
        result("action3", 3.0, 18.0, 5.0),
    ]
    costs = derive_costs(results)
    assert costs.api_cpu_ms_per_start == 3.0  # median of the webhook runs
    assert costs.worker_cpu_ms_per_start == 0.5
    assert costs.worker_cpu_ms_per_step == pytest.approx((15.0 - 0.5) / 3)
    assert (costs.pg_commits_per_start, costs.pg_commits_per_step) == (1.0, pytest.approx(4 / 3))
    assert costs.wal_bytes_per_step == 0.0  # the same WAL per run in both: nothing per step


def test_scale_parse_configs() -> None:
    assert parse_configs("1x1, 4x2") == [(1, 1), (4, 2)]
