"""For-each throughput and storage per item: is a fan-out linear in its size?

Run standalone from the repository root: ``python bench/foreach.py`` (``--sizes 200,1000``
picks the list sizes, default 200, 1,000 and 10,000; ``--concurrency`` the For-each's
concurrency, default 20). It starts the embedded stack of bench/cluster.py (PostgreSQL
with durable settings, Redis) and two ``railyard worker`` processes, publishes a body
workflow (``trigger.manual -> Set double = item.n * 2``) and a parent
(``trigger.manual -> For each over input.items (the body) -> Set total = $sum(double)``),
then for each size runs the parent once over ``[{"n": 0}, {"n": 1}, ...]`` (a 129 kB list
at 10,000 items, the case of docs/engine.md "For-each at scale") and prints, per size N:

- ``foreach_N_seconds``: wall time from just before ``start_run`` to the parent's
  ``finished_at``;
- ``foreach_N_items_per_s``: N / that time;
- ``foreach_N_bytes_per_item``: bytes the run stored, per item: the on-disk size
  (``pg_column_size`` of each whole row) of the parent's and every child's run row, step
  records, attempts and events, plus the payload rows written during the run, divided by
  N;
- ``foreach_N_parent_lag``: the parent's ``finished_at`` minus its last child's
  ``finished_at`` (seconds; never negative when the parent ends after its children);
- ``foreach_N_worker_cpu_ms_per_item`` and ``foreach_N_pg_cpu_ms_per_item``: CPU time the
  ``railyard worker`` processes and the PostgreSQL server processes (and the bench's own
  process, which starts the run, counted with the workers) spent during the run
  (``/proc/<pid>/stat``, bench/cluster.py's :class:`Meter`), per item: unlike the wall
  time, these hardly depend on what else the machine runs, so they say whether the work
  per item is flat on a shared machine;
- ``foreach_N_lock_waits_max`` and ``foreach_N_lock_waits_mean``: sessions waiting for a
  lock (``pg_stat_activity.wait_event_type = 'Lock'``), sampled every 0.5 s during the
  run: whether the children's ends queue on the parent's row (the issue saw up to 18);
- ``load_average`` beside the wall-time figures (they depend on the machine's load).

Bounded: one run per size, each waited for at most ``--timeout`` seconds (default 600).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from typing import Any

from sqlalchemy import select, text

from backend.db.models import WorkflowVersion
from backend.runtime import Runtime, build_runtime
from backend.services.identity import accounts
from backend.services.workflows import workflows
from bench.cluster import Meter, Stack
from bench.common import figure, load_average, manual_chain
from bench.engine import wait_all
from designer_schema.diagram import Diagram

DEFAULT_SIZES = (200, 1000, 10000)
MAX_ITEMS = 20000

_STORED = text(
    """
    with family as (
        select id from runs where id = :root or parent_run_id = :root
    )
    select
        (select coalesce(sum(pg_column_size(r.*)), 0) from runs r
            where r.id in (select id from family))
      + (select coalesce(sum(pg_column_size(s.*)), 0) from step_runs s
            where s.run_id in (select id from family))
      + (select coalesce(sum(pg_column_size(a.*)), 0) from attempts a
            where a.run_id in (select id from family))
      + (select coalesce(sum(pg_column_size(e.*)), 0) from events e
            where e.run_id in (select id from family))
      + (select coalesce(sum(pg_column_size(p.*)), 0) from payloads p
            where p.created_at >= :since)
    """
)
_TIMES = text(
    """
    select extract(epoch from p.finished_at),
           (select extract(epoch from max(c.finished_at)) from runs c
             where c.parent_run_id = p.id),
           p.status
    from runs p where p.id = :root
    """
)


async def published_by(rt: Runtime, name: str, diagram: Diagram, user: uuid.UUID) -> Any:
    """Publish ``diagram`` as workflow ``name``, owned and published by ``user`` (a run's
    children run as its version's publisher); its version row."""
    async with rt.sessionmaker() as session, session.begin():
        wf = await workflows.create_workflow(session, name, user)
        await workflows.save_draft(session, wf.id, diagram, rt.catalog)
        await workflows.publish(session, wf.id, rt.catalog, user)
        return await session.scalar(
            select(WorkflowVersion).where(WorkflowVersion.workflow_id == wf.id)
        )


async def body_and_parent(rt: Runtime, concurrency: int) -> WorkflowVersion:
    """Publish the body workflow and the parent calling it per item (both by an admin);
    the parent's version."""
    async with rt.sessionmaker() as session, session.begin():
        admin = await accounts.create_user(
            session, f"bench-{uuid.uuid4().hex[:8]}@example.com", None, role="admin"
        )
    body = await published_by(
        rt,
        f"bench-foreach-body-{uuid.uuid4().hex[:6]}",
        manual_chain([("double", "control.set", {"mapping": {"double": "=item.n * 2"}})]),
        admin.id,
    )
    loop = {
        "items": "=items",
        "workflow_id": str(body.workflow_id),
        "concurrency": concurrency,
    }
    return await published_by(
        rt,
        f"bench-foreach-{uuid.uuid4().hex[:6]}",
        manual_chain(
            [
                ("loop", "control.foreach", loop),
                ("total", "control.set", {"mapping": {"total": "=$sum($.double)"}}),
            ]
        ),
        admin.id,
    )


_LOCK_WAITS = text(
    "select count(*) from pg_stat_activity"
    " where wait_event_type = 'Lock' and datname = current_database()"
)


async def lock_waits(rt: Runtime, samples: list[int], stop: asyncio.Event) -> None:
    """Append the number of sessions waiting for a lock to ``samples`` every 0.5 s until
    ``stop`` is set."""
    async with rt.engine.connect() as conn:
        while not stop.is_set():
            samples.append(int((await conn.execute(_LOCK_WAITS)).scalar_one()))
            await conn.commit()
            try:
                await asyncio.wait_for(stop.wait(), 0.5)
            except TimeoutError:
                pass


async def one_size(
    rt: Runtime, meter: Meter, version: WorkflowVersion, size: int, timeout: float
) -> None:
    """Run the parent over ``size`` items and print its figures."""
    items = [{"n": i} for i in range(size)]
    async with rt.engine.connect() as conn:
        since = (await conn.execute(text("select now()"))).scalar_one()
    before, own_before = await meter.read(), time.process_time()
    started = time.time()
    samples: list[int] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(lock_waits(rt, samples, stop))
    run = await rt.execution.start_run(version, {"items": items}, trigger="manual")
    try:
        await wait_all(rt, [run.run_id], timeout, every=0.5)
    finally:
        stop.set()
        await sampler
    after, own = await meter.read(), time.process_time() - own_before
    cost = meter.cost(before, after, 0, after)
    async with rt.engine.connect() as conn:
        finished, last_child, status = (await conn.execute(_TIMES, {"root": run.run_id})).one()
        stored = (await conn.execute(_STORED, {"root": run.run_id, "since": since})).scalar_one()
    if status != "succeeded":
        async with rt.engine.connect() as conn:
            error = (
                await conn.execute(
                    text("select error from runs where id = :id"), {"id": run.run_id}
                )
            ).scalar_one()
        raise RuntimeError(f"the {size}-item run ended {status}: {error}")
    seconds = float(finished) - started
    figure("load_average", load_average(), "")
    figure(f"foreach_{size}_seconds", seconds, "s")
    figure(f"foreach_{size}_items_per_s", size / seconds, "items/s")
    figure(f"foreach_{size}_bytes_per_item", int(stored) / size, "B")
    figure(f"foreach_{size}_parent_lag", float(finished) - float(last_child or finished), "s")
    worker_cpu = cost.cpu.get("worker", 0.0) + own
    figure(f"foreach_{size}_worker_cpu_ms_per_item", 1000 * worker_cpu / size, "ms")
    figure(f"foreach_{size}_pg_cpu_ms_per_item", 1000 * cost.cpu["pg"] / size, "ms")
    figure(f"foreach_{size}_lock_waits_max", max(samples, default=0), "sessions")
    figure(f"foreach_{size}_lock_waits_mean", sum(samples) / max(len(samples), 1), "sessions")


async def measure(sizes: list[int], concurrency: int, timeout: float, stack: Stack) -> None:
    rt = await build_runtime(stack.settings(), pool_size=10)
    meter = await Meter.open(stack)
    try:
        version = await body_and_parent(rt, concurrency)
        await one_size(rt, meter, version, 20, timeout)  # warm-up: caches, statements
        for size in sizes:
            await one_size(rt, meter, version, size, timeout)
    finally:
        await meter.close()
        await rt.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES),
        help="comma-separated list sizes (each at most 20,000)",
    )
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    args = parser.parse_args(argv)
    sizes = [min(max(int(s), 1), MAX_ITEMS) for s in args.sizes.split(",") if s.strip()]
    with Stack() as stack:
        for _ in range(2):
            stack.worker()
        asyncio.run(measure(sizes, max(args.concurrency, 1), args.timeout, stack))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
