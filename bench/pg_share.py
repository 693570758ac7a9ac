"""PostgreSQL's share of a benchmark: what the server spent and wrote, and on which tables.

Used by bench/steps.py around its throughput phase; a :class:`PgSnapshot` taken before and
after prices the work in between:

- CPU seconds of the postmaster, its live backends and the backends it reaped
  (:func:`bench.common.tree_cpu_seconds`, the same reading bench/peers takes), and the same
  by process role (client backends, walwriter, checkpointer, autovacuum, ...);
- WAL bytes (``pg_current_wal_lsn()`` delta) and, from ``pg_walinspect``, WAL records by
  type (an index entry written is one ``Btree/INSERT_LEAF`` or GIN record);
- per table (``pg_stat_user_tables``): tuples inserted, updated, updated HOT (heap-only
  tuple: no index entry written, https://www.postgresql.org/docs/current/storage-hot.html)
  and the table's number of indexes;
- with ``pg_stat_statements`` loaded (:func:`enable_statements`): per statement, calls,
  execution time, shared blocks dirtied and WAL bytes.

Table counters reach the statistics views when a backend goes idle or within about a
second of it (``stats_fetch_consistency``); read after the work has settled (bench/steps.py
reads its ``pg_stat_database`` counters 11 s later, and these with them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import child_pids, figure, process_cpu_seconds, tree_cpu_seconds

TABLES = ("runs", "step_runs", "attempts", "events")
# WAL record types of a row lock (a locker's xmax written into the tuple)
ROW_LOCK_RECORDS = ("Heap/LOCK", "Heap2/LOCK_UPDATED")

_TABLE_STATS = """
select t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd,
       (select count(*) from pg_index i where i.indrelid = t.relid) as indexes,
       t.autovacuum_count + t.autoanalyze_count as autovacuums
from pg_stat_user_tables t
where t.relname = any($1::text[])
"""

_STATEMENTS = """
select query, calls, total_exec_time + total_plan_time, total_plan_time, shared_blks_dirtied,
       wal_bytes
from pg_stat_statements
where dbid = (select oid from pg_database where datname = current_database())
"""


@dataclass
class TableCounts:
    """``pg_stat_user_tables`` counters of one table and its number of indexes."""

    inserted: int
    updated: int
    hot: int
    indexes: int
    autovacuums: int
    """Automatic VACUUM and ANALYZE passes so far (an ANALYZE takes a transaction id)."""


@dataclass
class WalRecords:
    """WAL records of one ``resource manager/record type``: how many, their bytes and the
    bytes of the full-page images they carried."""

    kind: str
    count: int
    size: int
    page_images: int


@dataclass
class PgSnapshot:
    """One reading of the server's counters (see the module docstring)."""

    cpu: float
    wal: int
    lsn: str
    processes: dict[str, float]
    """CPU seconds by process role (:func:`process_roles`)."""
    tables: dict[str, TableCounts]
    statements: dict[str, tuple[int, float, float, int, int]] = field(default_factory=dict)
    queries: int = 2
    """Autocommit statements the reading itself sent (each one a commit)."""


async def enable_statements(stack: Any) -> bool:
    """Load ``pg_stat_statements`` into the embedded server of ``stack`` (a
    bench.cluster.Stack): ``shared_preload_libraries`` set with ``ALTER SYSTEM``, the server
    restarted, the extension created. Call it before any process connects. Returns False
    (and changes nothing) when the server's build lacks the module."""
    conn = await asyncpg.connect(stack.pg.dsn)
    try:
        have = await conn.fetchval(
            "select 1 from pg_available_extensions where name = 'pg_stat_statements'"
        )
        if not have:
            return False
        await conn.execute("alter system set shared_preload_libraries = 'pg_stat_statements'")
        await conn.execute("alter system set pg_stat_statements.track = 'all'")
        await conn.execute("alter system set pg_stat_statements.track_planning = on")
    finally:
        await conn.close()
    stack.pg.stop()
    stack.pg.start()
    conn = await asyncpg.connect(stack.pg.dsn)
    try:
        await conn.execute("create extension if not exists pg_stat_statements")
    finally:
        await conn.close()
    return True


def process_roles(postmaster: int) -> dict[str, float]:
    """CPU seconds of PostgreSQL's processes by role: ``backend`` (client connections),
    each background process by its title (``walwriter``, ``checkpointer``, ``autovacuum
    launcher``, ...) and ``ended`` (the processes the postmaster reaped: closed connections,
    autovacuum workers). Live processes' reaped children are counted with them."""
    roles: dict[str, float] = {}
    for pid in child_pids(postmaster):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            spent = process_cpu_seconds(pid, reaped_children=True)
        except (FileNotFoundError, ProcessLookupError):
            continue
        title = title.removeprefix("postgres: ").strip()
        role = "backend" if "(" in title or "[local]" in title else title
        roles[role] = roles.get(role, 0.0) + spent
    own = process_cpu_seconds(postmaster)
    roles["postmaster"] = own
    roles["ended"] = process_cpu_seconds(postmaster, reaped_children=True) - own
    return roles


async def snapshot(stack: Any, statements: bool = False) -> PgSnapshot:
    """Read the counters of ``stack``'s PostgreSQL (``statements``: pg_stat_statements too)."""
    conn = await asyncpg.connect(stack.pg.dsn)
    try:
        lsn, wal = await conn.fetchrow(
            "select pg_current_wal_lsn()::text, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
        )
        rows = await conn.fetch(_TABLE_STATS, list(TABLES))
        found = {}
        if statements:
            found = {
                r[0]: (r[1], r[2], r[3], r[4], int(r[5])) for r in await conn.fetch(_STATEMENTS)
            }
    finally:
        await conn.close()
    return PgSnapshot(
        cpu=tree_cpu_seconds(stack.postmaster_pid()),
        processes=process_roles(stack.postmaster_pid()),
        wal=int(wal),
        lsn=lsn,
        tables={
            r["relname"]: TableCounts(
                r["n_tup_ins"], r["n_tup_upd"], r["n_tup_hot_upd"], r["indexes"], r["autovacuums"]
            )
            for r in rows
        },
        statements=found,
        queries=3 if statements else 2,
    )


async def wal_records(stack: Any, before: PgSnapshot, after: PgSnapshot) -> list[WalRecords]:
    """The WAL written between two snapshots by record type, most bytes first
    (``pg_walinspect``'s ``pg_get_wal_stats``; the extension is created when missing)."""
    conn = await asyncpg.connect(stack.pg.dsn)
    try:
        await conn.execute("create extension if not exists pg_walinspect")
        rows = await conn.fetch(
            'select "resource_manager/record_type", count, record_size, fpi_size'
            " from pg_get_wal_stats($1::text::pg_lsn, $2::text::pg_lsn, true)"
            " where count > 0 order by record_size + fpi_size desc",
            before.lsn,
            after.lsn,
        )
    finally:
        await conn.close()
    return [WalRecords(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]


def report(
    before: PgSnapshot,
    after: PgSnapshot,
    records: list[WalRecords],
    runs: int,
    prefix: str = "steps",
) -> None:
    """Print PostgreSQL's cost per run between two snapshots (``records``: the WAL
    between them, :func:`wal_records`):

    - ``<prefix>_pg_cpu_per_run`` (ms) and a ``#`` line of it by process role;
    - ``<prefix>_pg_wal_bytes_per_run``, ``<prefix>_pg_wal_records_per_run``,
      ``<prefix>_pg_index_records_per_run`` (WAL records of B-tree and GIN index changes:
      index entries written, page splits), ``<prefix>_pg_row_locks_per_run`` (row-lock
      records: ``SELECT ... FOR UPDATE / FOR KEY SHARE``, a foreign key's check) and ``#``
      lines of the biggest record types;
    - per table ``<prefix>_pg.<table>.hot_share`` (HOT updates / updates, %) and a ``#``
      line of its counters;
    - when both snapshots hold them, ``#`` lines of the statements that cost most."""
    figure(f"{prefix}_pg_cpu_per_run", (after.cpu - before.cpu) / runs * 1000, "ms")
    roles = {
        role: (spent - before.processes.get(role, 0.0)) / runs * 1000
        for role, spent in after.processes.items()
    }
    busy = sorted(((ms, role) for role, ms in roles.items() if ms >= 0.0005), reverse=True)
    print("# pg cpu per run by process:", ", ".join(f"{role} {ms:.3f} ms" for ms, role in busy))
    figure(f"{prefix}_pg_wal_bytes_per_run", (after.wal - before.wal) / runs, "B")
    index = sum(r.count for r in records if r.kind.startswith(("Btree/", "Gin/")))
    figure(f"{prefix}_pg_wal_records_per_run", sum(r.count for r in records) / runs, "records")
    figure(f"{prefix}_pg_index_records_per_run", index / runs, "records")
    locks = sum(r.count for r in records if r.kind in ROW_LOCK_RECORDS)
    figure(f"{prefix}_pg_row_locks_per_run", locks / runs, "records")
    for r in records[:8]:
        print(
            f"# wal {r.kind}: {r.count / runs:.2f} records/run, {r.size / runs:.0f} B/run"
            f" (+ {r.page_images / runs:.0f} B/run of full-page images)"
        )
    for name in TABLES:
        new, old = after.tables.get(name), before.tables.get(name)
        if new is None or old is None:
            continue
        ins, upd = new.inserted - old.inserted, new.updated - old.updated
        hot = new.hot - old.hot
        figure(f"{prefix}_pg.{name}.hot_share", 100 * hot / upd if upd else 0.0, "%")
        print(
            f"# {name}: {new.indexes} indexes, per run {ins / runs:.2f} inserts, "
            f"{upd / runs:.2f} updates ({hot / runs:.2f} HOT); "
            f"{new.autovacuums - old.autovacuums} autovacuum / autoanalyze passes"
        )
    _statements(before, after, runs)


def _statements(before: PgSnapshot, after: PgSnapshot, runs: int) -> None:
    """``#`` lines of the 10 statements that took the most time between two snapshots."""
    rows = []
    for query, (calls, ms, plan, dirtied, wal) in after.statements.items():
        c0, ms0, p0, d0, w0 = before.statements.get(query, (0, 0.0, 0.0, 0, 0))
        if calls - c0:
            rows.append((ms - ms0, plan - p0, calls - c0, dirtied - d0, wal - w0, query))
    rows.sort(reverse=True)
    for ms, plan, calls, dirtied, wal, query in rows[:10]:
        text = " ".join(query.split())[:80]
        print(
            f"# statement: {ms / runs:.3f} ms/run ({plan / runs:.3f} planning), "
            f"{calls / runs:.2f} calls/run, {dirtied / runs:.1f} blocks dirtied/run, "
            f"{wal / runs:.0f} WAL B/run: {text}"
        )
