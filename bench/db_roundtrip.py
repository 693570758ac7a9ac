"""Python CPU per database round trip: one autocommit ``fetchrow`` through each way a
Railyard process can reach PostgreSQL.

Run from the repository root: ``python bench/db_roundtrip.py [--statements N]``. It starts
an embedded PostgreSQL in a temporary directory (bench/cluster.py ``Stack``, no Redis),
migrates it, and in this one process (uvloop, as the API and the workers run) sends ``N``
(default 4,000) statements one after the other through each path below, interleaved in 5
rounds so load drifts hit every path alike. For each path it prints ``figure:
db_roundtrip.<path>.<statement> = <value> us``: this process's CPU microseconds per
statement (``time.process_time``: user + system of the client only, PostgreSQL's own CPU is
not in it), the median over the rounds; and ``..._wall`` beside it. CPU per statement is
nearly load-insensitive; wall time is not (the load average is printed).

Paths:

- ``sa_autocommit``: what the run store did for every hot statement before the fast
  path: ``engine.connect()``, ``execution_options(isolation_level="AUTOCOMMIT")``, the
  statement straight on the asyncpg connection under it, and the connection's close
  (checkin, isolation reset).
- ``sa_raw``: ``await engine.raw_connection()`` (the pool's checkout with its events,
  in a greenlet), the statement on the asyncpg connection, checkin in a greenlet.
- ``fast``: :meth:`backend.db.fast_path.FastPath.fetchrow`, the run store's path now
  (the pool's checkout and checkin without greenlets while a connection is idle).
- ``asyncpg_pool``: ``asyncpg.Pool.acquire()`` / release around the statement (release
  resets the connection with a statement of its own; a second pool: shown for
  comparison, not used).
- ``asyncpg_bare``: the statement on one asyncpg connection held throughout: the floor.

Statements: ``select`` (``SELECT $1::bigint``) and ``read_run`` (the run store's unlocked
read, backend/db/run_reads.py, of a run id that does not exist: the real statement's
planning and execution without rows to decode). Bounded: 5 x paths x 2 x N statements.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import uvloop
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from backend.db.engine import make_engine
from backend.db.fast_path import FastPath
from backend.db.run_reads import _READ_RUN
from bench.cluster import Stack
from bench.common import figure, load_average

ROUNDS = 5
STATEMENTS = {"select": ("SELECT $1::bigint", 1), "read_run": (_READ_RUN, uuid.uuid4())}

Send = Callable[[str, Any], Awaitable[Any]]


def paths(engine: AsyncEngine, fast: FastPath, pool: asyncpg.Pool, bare: Any) -> dict[str, Send]:
    """Each path as ``send(sql, arg)`` running one statement and returning its row."""

    async def sa_autocommit(sql: str, arg: Any) -> Any:
        async with engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            return await auto.sync_connection.connection.driver_connection.fetchrow(sql, arg)  # type: ignore[union-attr]

    async def sa_raw(sql: str, arg: Any) -> Any:
        raw = await engine.raw_connection()
        try:
            return await raw.driver_connection.fetchrow(sql, arg)  # type: ignore[union-attr]
        finally:
            await greenlet_spawn(raw.close)

    async def fast_path(sql: str, arg: Any) -> Any:
        return await fast.fetchrow(sql, arg)

    async def asyncpg_pool(sql: str, arg: Any) -> Any:
        async with pool.acquire() as conn:
            return await conn.fetchrow(sql, arg)

    async def asyncpg_bare(sql: str, arg: Any) -> Any:
        return await bare.fetchrow(sql, arg)

    return {
        "sa_autocommit": sa_autocommit,
        "sa_raw": sa_raw,
        "fast": fast_path,
        "asyncpg_pool": asyncpg_pool,
        "asyncpg_bare": asyncpg_bare,
    }


async def measure(url: str, count: int) -> None:
    """Send ``count`` statements per path, statement and round; print the figures."""
    engine = make_engine(url, pool_size=2)
    fast = FastPath(engine)
    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    bare = await asyncpg.connect(dsn)
    sends = paths(engine, fast, pool, bare)
    cpu: dict[tuple[str, str], list[float]] = {}
    wall: dict[tuple[str, str], list[float]] = {}
    try:
        for _round in range(ROUNDS):
            for path, send in sends.items():
                for name, (sql, arg) in STATEMENTS.items():
                    for _ in range(50):  # warm: statement prepared, connection pooled
                        await send(sql, arg)
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    for _ in range(count):
                        await send(sql, arg)
                    cpu.setdefault((path, name), []).append((time.process_time() - cpu0) / count)
                    wall.setdefault((path, name), []).append((time.perf_counter() - wall0) / count)
    finally:
        await bare.close()
        await pool.close()
        await engine.dispose()
    print(f"load average {load_average():.2f}", flush=True)
    for (path, name), values in cpu.items():
        figure(f"db_roundtrip.{path}.{name}", statistics.median(values) * 1e6, "us")
        wall_us = statistics.median(wall[(path, name)]) * 1e6
        figure(f"db_roundtrip.{path}.{name}_wall", wall_us, "us")
    for name in STATEMENTS:
        old = statistics.median(cpu[("sa_autocommit", name)])
        new = statistics.median(cpu[("fast", name)])
        figure(f"db_roundtrip.fast_vs_sa_autocommit.{name}", new / old, "ratio", 3)


def main() -> None:
    """Parse the arguments, start the stack, measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=4000, help="per path and round")
    args = parser.parse_args()
    with Stack("railyard-roundtrip-", redis=False, fast=True) as stack:
        uvloop.run(measure(stack.pg.url, max(1, args.statements)))


if __name__ == "__main__":
    main()
