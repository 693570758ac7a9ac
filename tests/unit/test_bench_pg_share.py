"""PostgreSQL's share of a bench phase (bench/pg_share.py): figures per run from two
snapshots and the WAL records between them."""

from __future__ import annotations

import os

import pytest

from bench.pg_share import PgSnapshot, TableCounts, WalRecords, process_roles, report


def snapshot(cpu: float, wal: int, runs: TableCounts, statements: int = 0) -> PgSnapshot:
    queries = {"WITH at_revision AS (...)": (statements, statements * 0.5, 0.1, 2, 4000)}
    return PgSnapshot(
        cpu=cpu,
        wal=wal,
        lsn="0/0",
        processes={"backend": cpu, "walwriter": 0.0},
        tables={"runs": runs},
        statements=queries if statements else {},
    )


def figures(out: str) -> dict[str, float]:
    found = {}
    for line in out.splitlines():
        if line.startswith("figure: "):
            name, value = line.removeprefix("figure: ").split(" = ")
            found[name] = float(value.split()[0])
    return found


def test_report_prices_the_phase_per_run(capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(1.0, 1_000, TableCounts(10, 40, 20, 12, 3), statements=40)
    after = snapshot(1.4, 151_000, TableCounts(110, 440, 320, 12, 5), statements=440)
    records = [
        WalRecords("Btree/INSERT_LEAF", 8_600, 600_000, 0),
        WalRecords("Heap/INSERT", 2_000, 340_000, 8_192),
        WalRecords("Gin/UPDATE_META_PAGE", 200, 45_000, 0),
    ]
    report(before, after, records, 100)
    out = capsys.readouterr().out
    found = figures(out)
    assert found["steps_pg_cpu_per_run"] == pytest.approx(4.0)
    assert found["steps_pg_wal_bytes_per_run"] == 1_500
    assert found["steps_pg_wal_records_per_run"] == 108
    assert found["steps_pg_index_records_per_run"] == 88
    assert found["steps_pg.runs.hot_share"] == 75
    assert "# runs: 12 indexes, per run 1.00 inserts, 4.00 updates (3.00 HOT); 2 autovacuum" in out
    assert "# pg cpu per run by process: backend 4.000 ms" in out
    assert "walwriter" not in out  # roles that spent nothing are left out
    assert "# statement: 2.000 ms/run (0.000 planning), 4.00 calls/run" in out


def test_a_table_without_updates_has_no_hot_share_to_divide(
    capsys: pytest.CaptureFixture[str],
) -> None:
    inserts_only = TableCounts(1300, 0, 0, 3, 0)
    before, after = snapshot(0.0, 0, TableCounts(0, 0, 0, 3, 0)), snapshot(0.0, 0, inserts_only)
    report(before, after, [], 100)
    assert figures(capsys.readouterr().out)["steps_pg.runs.hot_share"] == 0


def test_process_roles_of_a_process_without_children() -> None:
    roles = process_roles(os.getpid())
    assert set(roles) >= {"postmaster", "ended"}
    assert roles["postmaster"] > 0
