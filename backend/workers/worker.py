"""The arq worker: ``execute_step`` and ``advance_run`` jobs plus the periodic sweeper.

Tuning (DESIGN.md: keep arq behind the Dispatcher port and tune it): idle workers sleep
until the dispatcher wakes them (no idle polling, low dispatch latency), results not kept
(the truth is in PostgreSQL), ``max_jobs`` bounded so one worker does not hoard work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from arq.worker import Worker, func
from redis.exceptions import RedisError

from backend.observability import gc_pauses, logs, metrics, tracing
from backend.runtime import Runtime, build_runtime
from backend.services.availability import database_unavailable
from backend.services.operations.metrics_view import forget_worker, heartbeat
from backend.services.runs.draining import HAND_BACK_SECONDS, finish_or_hand_back
from backend.services.runs.recovery import sweep
from backend.services.runs.storable import refused_by_database
from backend.settings import Settings
from backend.transport.redis_client import RedisTarget, arq_redis_settings
from backend.workers.health import ServiceHealth
from backend.workers.run_control import enforce_deadlines, listen_for_cancels
from backend.workers.wake import DEFAULT_IDLE_POLL_SECONDS, WakeableWorker

log = logging.getLogger(__name__)

# How often a worker whose job slots are all busy looks at the queue again. An idle worker
# does not poll: it sleeps until the dispatcher wakes it (backend/workers/wake.py).
POLL_DELAY_SECONDS = 0.005

DEFAULT_MAX_JOBS = 20
"""Jobs one worker runs at once unless told otherwise (``railyard worker --max-jobs``; the
KEDA threshold in deploy/kubernetes follows it)."""


def _started(ctx: dict[str, Any], function: str, run_id: str, **ids: str) -> None:
    """Record how late the job started (its due time is arq's ``score``, in ms) and bind
    the run (and step) ids to this job's log lines."""
    score = ctx.get("score")
    if score:
        metrics.dispatch_latency(function, time.time() - score / 1000)
    logs.clear()
    logs.bind(run_id=run_id, **ids)


async def execute_step(
    ctx: dict[str, Any], run_id: str, step_id: str, trace: dict[str, str] | None = None
) -> None:
    """arq job: run one attempt of a ready step (and the steps it continues inline);
    ``trace``: the dispatcher's trace context (tracing on only).

    The job is already off arq's queue when it starts (the worker takes it whole,
    backend/workers/pickup.py). The step's claim in PostgreSQL is what makes it
    exclusive, and a job lost before its claim is re-dispatched by the sweeper.
    """
    runtime: Runtime = ctx["runtime"]
    _started(ctx, "execute_step", run_id, step_id=step_id)
    with tracing.job_span("execute_step", trace, run_id):
        async with _database(ctx, run_id):
            await runtime.execution.execute_step(uuid.UUID(run_id), step_id)


async def advance_run(
    ctx: dict[str, Any], run_id: str, trace: dict[str, str] | None = None
) -> None:
    """arq job: advance (or start) a run; ``trace``: the dispatcher's trace context."""
    runtime: Runtime = ctx["runtime"]
    _started(ctx, "advance_run", run_id)
    with tracing.job_span("advance_run", trace, run_id):
        async with _database(ctx, run_id):
            await runtime.execution.advance_run(uuid.UUID(run_id))


@contextlib.asynccontextmanager
async def _database(ctx: dict[str, Any], run_id: str) -> AsyncIterator[None]:
    """Record in the worker's health what a job of run ``run_id`` saw of PostgreSQL.

    A job that fails because PostgreSQL is unreachable ends quietly (one warning per
    outage, no traceback per job): its step stays ready, or its attempt's lease runs out,
    in PostgreSQL, and the sweeper dispatches it again once the database is back.

    A job whose change PostgreSQL refuses as a value it cannot store (a data error, not
    an outage: the same job would be refused on every retry) fails the run with
    :data:`~backend.services.runs.storable.UNSTORABLE_RUN_ERROR` and logs one line
    (:meth:`~backend.services.runs.execution.Execution.fail_unstorable`); it is not retried.
    """
    health: ServiceHealth = ctx["health"]
    try:
        yield
    except Exception as exc:
        if refused_by_database(exc):
            health.up("database")
            runtime: Runtime = ctx["runtime"]
            await runtime.execution.fail_unstorable(uuid.UUID(run_id), exc)
            return
        if not database_unavailable(exc):
            raise
        health.down("database", exc)
        return
    health.up("database")


async def _sweeper(runtime: Runtime, health: ServiceHealth) -> None:
    while True:
        try:
            counts = await sweep(
                runtime.execution.recovery, grace_seconds=runtime.settings.sweep_interval
            )
            if any(counts.values()):
                log.info("sweeper: %s", counts)
            health.up("database")
        except Exception as exc:  # keep sweeping whatever one pass hit
            if database_unavailable(exc):
                health.down("database", exc)
            else:
                log.exception("sweeper pass failed")
        await asyncio.sleep(runtime.settings.sweep_interval)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """Event loop for worker and API processes: uvloop when installed (less CPU per step
    for asyncpg, Redis and HTTP I/O; bench/engine.py), else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def make_worker(
    settings: Settings,
    *,
    burst: bool = False,
    max_jobs: int = DEFAULT_MAX_JOBS,
    sweep: bool = True,
    idle_poll: float = DEFAULT_IDLE_POLL_SECONDS,
    tune_gc: bool = False,
) -> WakeableWorker:
    """An arq :class:`Worker` for ``settings``; ``burst`` exits when the queue is empty.

    ``tune_gc`` (the ``railyard worker`` process): once its runtime is built, the worker
    freezes the objects alive and collects less often, like the API
    (:func:`backend.observability.gc_pauses.configure`): a full collection then no longer
    walks the runtime's long-lived objects in the middle of a step.

    ``idle_poll`` is the longest sleep, in seconds, of an idle worker that no wake-up
    reaches (see :class:`~backend.workers.wake.WakeableWorker`). The worker rides out
    Redis and PostgreSQL outages; ``worker.health`` tells what it last saw of each.

    Its PostgreSQL pool keeps one connection per job slot (``max_jobs``): with fewer, a
    worker running all its slots opens and closes overflow connections again and again,
    and every new connection costs PostgreSQL a backend and asyncpg's statement
    preparations (bench/peers measured 3.5x the sessions and about 50 % more PostgreSQL
    CPU per run with a pool of 10 under 20 slots).
    """

    async def startup(ctx: dict[str, Any]) -> None:
        ctx["runtime"] = await build_runtime(settings, name="worker", pool_size=max_jobs)
        # httpx imports its transport stack on the first client (about 0.5 s on a 2-core
        # machine): pay that here, not in the first step this worker runs
        await httpx.AsyncHTTPTransport().aclose()
        runtime = ctx["runtime"]
        await runtime.load_imported_connectors()
        tasks = [
            listen_for_cancels(runtime.redis, runtime.execution.cancel_watch),
            heartbeat(runtime.redis, runtime.execution.env.worker),
        ]
        if sweep and not burst:
            tasks += [_sweeper(runtime, ctx["health"]), enforce_deadlines(runtime.execution)]
        ctx["background"] = [asyncio.create_task(t) for t in tasks]
        if tune_gc:
            gc_pauses.configure()

    async def shutdown(ctx: dict[str, Any]) -> None:
        background = ctx.get("background", ())
        for task in background:
            task.cancel()
        await asyncio.wait(background, timeout=2) if background else None
        if "runtime" in ctx:
            runtime = ctx["runtime"]
            await forget_worker(runtime.redis, runtime.execution.env.worker)
            await runtime.close()

    target = RedisTarget.from_settings(settings)
    return WakeableWorker(
        functions=[func(execute_step, max_tries=1), func(advance_run, max_tries=1)],
        redis_settings=arq_redis_settings(target),
        redis_target=target,
        on_startup=startup,
        on_shutdown=shutdown,
        burst=burst,
        max_jobs=max_jobs,
        poll_delay=POLL_DELAY_SECONDS,
        keep_result=0,
        handle_signals=False,
        job_timeout=3600,
        idle_poll=idle_poll,
    )


async def stop_worker(worker: Worker, *, grace_seconds: float = 10.0) -> None:
    """Stop ``worker`` gracefully (SIGTERM; docs/operations.md, "Shutdown and failover").

    1. Drain (backend/services/runs/draining.py): the poll loop stops, so no new job is taken;
       a job already taken but not yet claimed is dispatched again for another worker,
       and a completing step no longer claims the next one for this worker.
    2. Running jobs get ``grace_seconds`` to finish (steps complete as usual).
    3. Attempts still running are handed back: stopped, closed as ``released`` and their
       steps dispatched at once to other workers (no wait for the lease); the hand-back
       writes get :data:`HAND_BACK_SECONDS`.
    4. Whatever is still running then is cancelled; the sweeper recovers such a step when
       its lease runs out, so nothing is lost.

    So the worker ends within about ``grace_seconds + HAND_BACK_SECONDS`` plus its own
    closing. This is arq 0.28's ``close()`` made safe for shutdowns during an outage or
    with cancelled jobs: arq's gathers the job tasks without ``return_exceptions`` (a
    cancelled job or one that hit a Redis error aborts the shutdown) and needs Redis to
    delete its health key. Here job errors are collected, a Redis error is ignored, and
    ``on_shutdown`` (which closes the runtime) and the closing of the Redis pool always
    happen.
    """
    runtime: Runtime | None = worker.ctx.get("runtime")
    drain = runtime.execution.env.drain if runtime is not None else None
    if drain is not None:
        drain.begin()
    # take no job from now on, even if the poll loop outlives its cancellation: a draining
    # worker hands each job it takes back to the queue, and taking them again would spin
    worker.allow_pick_jobs = False
    if worker.main_task is not None:
        worker.main_task.cancel()
    jobs = list(worker.tasks.values())
    if drain is not None:
        await finish_or_hand_back(drain, jobs, grace_seconds)
    else:  # never started: nothing of ours runs
        for task in jobs:
            task.cancel()
    await asyncio.gather(*worker.tasks.values(), return_exceptions=True)
    if worker.main_task is not None:
        # bounded: a poll loop that missed its cancellation must not hold the shutdown
        done, _ = await asyncio.wait([worker.main_task], timeout=HAND_BACK_SECONDS)
        if not done:
            log.warning("the worker's poll loop did not stop within %g s", HAND_BACK_SECONDS)
    if worker._pool is None:
        return
    if worker.on_shutdown is not None:
        await worker.on_shutdown(worker.ctx)
    with contextlib.suppress(RedisError, OSError):
        await worker._pool.delete(worker.health_check_key)
    await worker._pool.aclose()
    worker._pool = None
