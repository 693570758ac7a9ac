"""Search benchmark: 1,000,000 runs in PostgreSQL, five typical queries, index sizes, and
the Elasticsearch indexer's lag under a 500 runs/s load.

Run standalone from the repository root: ``python bench/search.py [--runs N]``. It starts
its own embedded PostgreSQL (``fast``: no fsync, the data is throw-away) in a temporary
directory, migrates, and prints ``figure: <name> = <value> <unit>`` lines:

- ``generate_runs``: seconds to write the runs (``INSERT ... SELECT generate_series``: 50
  workflows, 90 days, 80 % succeeded / 10 % failed / 5 % timed out / 3 % cancelled / 2 %
  running; inputs ``{"customer": "cust-<n>", "order": "ORD-<i>", "email": ..., "amount":
  ...}``, errors on failed runs, two step records per failed run), ``build_indexes``:
  seconds to build the search indexes afterwards (bulk-load practice: drop, load, create).
- ``q<k>_<name>_p50`` / ``_p95``: milliseconds per search through the PostgreSQL backend
  (the page of 25 hits, the facet counts and the total, as ``/api/v1/search`` does), 40 runs
  each after 3 warm-ups, for an admin (``q1``-``q5``) and for a user who reads 10 of the 50
  workflows (``q6``). Target p95 < 100 ms. ``q<k>_<name>_cpu``: milliseconds on a CPU per
  search, the PostgreSQL backends' and this process's together (load-insensitive, unlike the
  wall times: compare runs on a loaded machine by these); ``queries_load_average_start`` /
  ``_end``: the 1-minute load average around them.
- ``index_<name>``: MB on disk of each search index and of the runs table.
- ``indexer_lag_p50`` / ``_p95`` / ``_max``: seconds from a run's commit (with its outbox
  event) to its document being stored, while runs are written at 500 runs/s for 10 s, with
  ``railyard``'s outbox indexer sending ``_bulk`` requests to a local server emulating
  Elasticsearch's bulk API (tests/fakes/elasticsearch.py in its own process; no
  Elasticsearch can be installed here). Times are wall-clock (both processes, one host).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.engine import make_engine, make_sessionmaker
from backend.search.criteria import build_criteria
from backend.search.elastic import ElasticSearch, make_client
from backend.search.es_indexer import OutboxIndexer
from backend.search.model import Visibility
from backend.search.postgres import PostgresSearch
from bench.cluster import Stack
from bench.common import cpu_seconds, figure, load_average

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = 50
REPEATS = 40
QUERIES = [
    ("failed", "status:failed"),
    ("value_in_input", "cust-4711"),
    ("workflow_failed_week", 'status:failed,timed_out workflow:"Order intake 7" since:7d'),
    ("tag_and_phrase", 'tag:billing "gateway timeout"'),
    ("everything", ""),
]
INDEXES = ("ix_runs_workflow_search", "ix_runs_created_id", "ix_runs_status_created_id")


GENERATE = """
insert into runs (id, workflow_id, version_id, version_number, status, trigger, input,
                  output, error, created_at, started_at, finished_at)
select gen_random_uuid(), w.id, w.vid, 1, s.status,
       (array['webhook','schedule','manual','api'])[1 + (i % 4)],
       jsonb_build_object('customer', 'cust-' || (i % 200000), 'order', 'ORD-' || i,
                          'email', 'user' || (i % 50000) || '@example.com',
                          'amount', i % 1000),
       case when s.status = 'succeeded' then jsonb_build_object('total', i % 997) end,
       case when s.status = 'failed' then jsonb_build_object('message',
              (array['HTTP 504 gateway timeout from billing API', 'connection refused',
                     'invalid payload: missing field email'])[1 + (i % 3)],
              'step_id', 'call_api')
            when s.status = 'timed_out' then '{"message": "run timed out after 300 s"}'::jsonb
       end,
       t.created, t.created, case when s.status <> 'running'
                                  then t.created + make_interval(secs => (i % 120) + 0.25) end
from generate_series(1, :n) as i
cross join lateral (select now() - make_interval(secs => (i::float8 / :n) * 90 * 86400)
                    as created) t
cross join lateral (select (hashint4(i) & 2147483647) % 100 as p) r
cross join lateral (select case when r.p < 80 then 'succeeded' when r.p < 90 then 'failed'
                                when r.p < 95 then 'timed_out' when r.p < 98 then 'cancelled'
                                else 'running' end as status) s
join (select id, (select id from workflow_versions v where v.workflow_id = wf.id) as vid,
             row_number() over (order by name) - 1 as k from workflows wf) w
  on w.k = i % :w
"""


async def setup(url: str, n: int) -> None:
    """Workflows, then the runs with the search indexes dropped, then the indexes again
    (the definitions the migration created)."""
    engine = make_engine(url, pool_size=2)
    async with engine.begin() as conn:
        for k in range(WORKFLOWS):
            wid = uuid.uuid4()
            tags = ["billing", "eu"] if k % 5 == 0 else (["ops"] if k % 5 == 1 else [])
            await conn.execute(
                text(
                    "insert into workflows (id, name, description, draft, webhook_token, tags,"
                    " active_version) values (:id, :name, '', '{}', :tok, :tags, 1)"
                ),
                {"id": wid, "name": f"Order intake {k}", "tok": uuid.uuid4().hex, "tags": tags},
            )
            await conn.execute(
                text(
                    "insert into workflow_versions (id, workflow_id, number, diagram, graph,"
                    " content_hash) values (gen_random_uuid(), :id, 1, '{}', '{}', :h)"
                ),
                {"id": wid, "h": uuid.uuid4().hex},
            )
        definitions = [
            (
                await conn.execute(
                    text("select indexdef from pg_indexes where indexname = :n"), {"n": name}
                )
            ).scalar_one()
            for name in INDEXES
        ]
        for name in INDEXES:
            await conn.execute(text(f"drop index {name}"))
    started = time.perf_counter()
    async with engine.begin() as conn:
        await conn.execute(text("set local synchronous_commit = off"))
        await conn.execute(text(GENERATE), {"n": n, "w": WORKFLOWS})
        await conn.execute(
            text(
                "insert into step_runs (run_id, step_id, status, ports, attempts)"
                " select id, s, case when s = 'call_api' then 'failed' else 'succeeded' end,"
                " '[]', 1 from runs, unnest(array['webhook', 'call_api']) s"
                " where status = 'failed'"
            )
        )
    figure("generate_runs", time.perf_counter() - started, "s")
    started = time.perf_counter()
    async with engine.begin() as conn:
        await conn.execute(text("set local maintenance_work_mem = '256MB'"))
        for definition in definitions:  # as the migration made them
            await conn.execute(text(definition))
    async with engine.connect() as conn:
        await conn.execute(text("commit"))
        await conn.execute(text("vacuum analyze runs"))
        await conn.execute(text("vacuum analyze step_runs"))
        await conn.execute(text("vacuum analyze workflows"))
    figure("build_indexes", time.perf_counter() - started, "s")
    async with engine.connect() as conn:
        for name in (*INDEXES, "runs"):
            size = (
                await conn.execute(text("select pg_relation_size(:n)"), {"n": name})
            ).scalar_one()
            figure(f"index_{name}", size / 1e6, "MB")
    await engine.dispose()


async def _cpu(conn: AsyncConnection) -> float:
    """CPU seconds so far of this process and of the database's client backends."""
    pids = (
        await conn.execute(
            text(
                "select pid from pg_stat_activity where datname = current_database()"
                " and backend_type = 'client backend'"
            )
        )
    ).scalars()
    return cpu_seconds(os.getpid()) + sum(cpu_seconds(pid) for pid in pids)


async def queries(url: str) -> None:
    engine = make_engine(url, pool_size=2)
    backend = PostgresSearch(make_sessionmaker(engine))
    async with engine.connect() as conn:
        some = (
            await conn.execute(text("select id from workflows order by name limit 10"))
        ).scalars()
        ten = frozenset(str(i) for i in some)
    cases = [(f"q{k + 1}_{name}", q, Visibility(None, True)) for k, (name, q) in enumerate(QUERIES)]
    cases.append(("q6_user_failed_10_workflows", "status:failed", Visibility(ten, False)))
    figure("queries_load_average_start", load_average(), "")
    async with engine.connect() as probe:
        for name, q, visible in cases:
            times = []
            for i in range(REPEATS + 3):
                if i == 3:
                    cpu = await _cpu(probe)
                started = time.perf_counter()
                result = await backend.search(build_criteria(q), visible, query=q)
                if i >= 3:
                    times.append((time.perf_counter() - started) * 1000)
            cpu = await _cpu(probe) - cpu
            times.sort()
            figure(f"{name}_p50", statistics.median(times), "ms")
            figure(f"{name}_p95", times[int(len(times) * 0.95) - 1], "ms")
            figure(f"{name}_cpu", cpu * 1000 / REPEATS, "ms")
            figure(f"{name}_total", result.total, "runs")
    figure("queries_load_average_end", load_average(), "")
    await engine.dispose()


async def indexer_lag(url: str, rate: int = 500, seconds: int = 10) -> None:
    engine = make_engine(url, pool_size=4)
    sessionmaker = make_sessionmaker(engine)
    emulator = subprocess.Popen(  # noqa: ASYNC220 - long-lived child, not awaited
        [sys.executable, "-m", "tests.fakes.elasticsearch"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert emulator.stdout is not None
    es_url = emulator.stdout.readline().strip()
    backend = ElasticSearch(make_client(es_url), sessionmaker, "bench")
    await backend.ensure_indexes()
    async with engine.begin() as conn:  # start the outbox after the generated history
        await conn.execute(
            text(
                "insert into search_cursors (name, position)"
                " select n, coalesce((select max(id) from events), 0)"
                " from unnest(array['bench:events', 'bench:audit']) n"
            )
        )
        await conn.execute(
            text(
                "update search_cursors set position = coalesce((select max(id) from audit_log), 0)"
                " where name = 'bench:audit'"
            )
        )
        wid, vid = (
            await conn.execute(text("select workflow_id, id from workflow_versions limit 1"))
        ).one()
    indexer = OutboxIndexer(sessionmaker, backend, prefix="bench", batch=1000)
    stop = asyncio.Event()
    task = asyncio.create_task(indexer.run(stop, idle=0.05))
    committed: dict[str, float] = {}
    batch = rate // 10
    started = time.perf_counter()
    for tick in range(seconds * 10):
        ids = [str(uuid.uuid4()) for _ in range(batch)]
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "with new as (insert into runs (id, workflow_id, version_id, version_number,"
                    " status, trigger, input, created_at, started_at, finished_at)"
                    " select x::uuid, :w, :v, 1, 'succeeded', 'webhook',"
                    " jsonb_build_object('order', x), now(), now(), now()"
                    " from unnest(cast(:ids as text[])) x returning id)"
                    " insert into events (run_id, kind, data) select id, 'run.succeeded', '{}'"
                    " from new"
                ),
                {"w": wid, "v": vid, "ids": ids},
            )
        committed.update(dict.fromkeys(ids, time.time()))
        await asyncio.sleep(max(0.0, started + (tick + 1) / 10 - time.perf_counter()))
    write_rate = len(committed) / (time.perf_counter() - started)
    stored: dict[str, float] = {}
    async with httpx.AsyncClient(base_url=es_url) as http:
        for _ in range(600):  # up to 60 s to catch up
            stored = (await http.get("/_emulator/stored_at/bench-runs")).json()
            if committed.keys() <= stored.keys():
                break
            await asyncio.sleep(0.1)
    stop.set()
    await task
    lags = {rid: stored[rid] - at for rid, at in committed.items() if rid in stored}
    values = sorted(lags.values())
    figure("indexer_write_rate", write_rate, "runs/s")
    figure("indexer_lag_p50", statistics.median(values), "s")
    figure("indexer_lag_p95", values[int(len(values) * 0.95) - 1], "s")
    figure("indexer_lag_max", values[-1], "s")
    figure("indexer_missing", len(committed) - len(lags), "runs")
    await backend.close()
    assert emulator.stdin is not None
    emulator.stdin.close()
    emulator.wait(timeout=10)
    await engine.dispose()


async def measure(database_url: str, n: int) -> None:
    """Fill ``n`` runs, then time the queries and the indexer's lag."""
    await setup(database_url, n)
    await queries(database_url)
    await indexer_lag(database_url)


def main(n: int) -> None:
    with Stack("railyard-bench-search-", redis=False, fast=True) as stack:
        asyncio.run(measure(stack.pg.url, n))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    main(parser.parse_args().runs)
