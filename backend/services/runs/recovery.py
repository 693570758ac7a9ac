"""Recovery: the sweeper's pass over PostgreSQL, the truth (DESIGN.md: anything lost in
Redis, or with a worker, is recovered from PostgreSQL).

Run periodically by the leader-elected scheduler (and by ``railyard worker`` when asked
to sweep); every rule is idempotent, so two passes at once only cost work. A
:class:`Recovery` is handed what it needs: the queries it reads (``RecoveryQueries``,
implemented by backend/db/recovery_queries.py), the clock and dispatcher, and the three
transitions it applies (run timeout, lease expiry, admission).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from backend.engine.ports import Clock, Dispatcher, WorkflowSettings


class RecoveryQueries(Protocol):
    """What a sweep reads (each bounded)."""

    async def overdue_runs(self, now: datetime) -> list[uuid.UUID]: ...

    async def next_deadline(self) -> datetime | None: ...

    async def expired_attempts(self, now: datetime) -> list[tuple[int, uuid.UUID, str, str]]: ...

    async def ready_steps(self, due_before: datetime) -> list[tuple[uuid.UUID, str]]: ...

    async def waits_past_timeout(self, before: datetime) -> list[tuple[uuid.UUID, str]]: ...

    async def queued_runs(
        self, created_before: datetime
    ) -> list[tuple[uuid.UUID, uuid.UUID, dict[str, Any] | None]]: ...

    async def waiting_parents(self, ended_before: datetime) -> list[uuid.UUID]: ...


class _Ports(Protocol):
    clock: Clock
    dispatcher: Dispatcher


class Recovery:
    """One recovery pass at a time: see :func:`sweep`.

    ``timeout_run(run_id) -> bool`` ends an overdue run; ``expire_lease(run_id, step_id,
    attempt_id, token) -> bool`` makes a lost worker's step ready again;
    ``admit_queued(workflow_id) -> int`` starts a limited workflow's queued runs."""

    def __init__(
        self,
        queries: RecoveryQueries | None,
        ports: _Ports,
        *,
        timeout_run: Callable[[uuid.UUID], Awaitable[bool]],
        expire_lease: Callable[[uuid.UUID, str, int, str], Awaitable[bool]],
        admit_queued: Callable[[uuid.UUID], Awaitable[int]],
    ) -> None:
        self.queries = queries
        self.ports = ports
        self.timeout_run = timeout_run
        self.expire_lease = expire_lease
        self.admit_queued = admit_queued


async def time_out_overdue(recovery: Recovery) -> int:
    """Time out the active runs whose run timeout (``runs.deadline_at``) has passed (at
    most 500 per call); returns how many this call ended (another process may have ended
    some first). Called by every sweep (certain) and by each worker's deadline loop
    (prompt: backend/workers/run_control.py)."""
    queries = recovery.queries
    if queries is None:
        raise RuntimeError("this execution service was built without recovery queries")
    ended = 0
    for run_id in await queries.overdue_runs(recovery.ports.clock.now()):
        try:
            ended += int(await recovery.timeout_run(run_id))
        except LookupError:  # the run was deleted meanwhile
            pass
    return ended


async def sweep(recovery: Recovery, *, grace_seconds: float = 5.0) -> dict[str, int]:
    """One recovery pass. Returns counts: ``expired``, ``redispatched``, ``started``,
    ``woken``, ``timed_out``.

    - runs past their run timeout (``deadline_at``) are timed out;
    - running attempts whose lease ran out are expired and their step made ready again
      (a lost worker is not the step's failure, so it does not use up retries);
    - ready steps due for longer than ``grace_seconds`` are dispatched again (a lost job),
      and so are call steps still waiting that long after their step timeout;
    - queued runs older than ``grace_seconds`` are advanced (child runs included); for
      a workflow with ``max_concurrent_runs`` the oldest queued runs that fit start;
    - parents whose calling step still runs although a child ended more than
      ``grace_seconds`` ago are advanced (a lost wake-up job).
    Due durable timers are ready steps, so the third rule fires them.
    """
    queries = recovery.queries
    if queries is None:
        raise RuntimeError("this execution service was built without recovery queries")
    dispatcher = recovery.ports.dispatcher
    now = recovery.ports.clock.now()
    grace = now - timedelta(seconds=grace_seconds)
    counts = {"expired": 0, "redispatched": 0, "started": 0, "woken": 0, "timed_out": 0}
    counts["timed_out"] = await time_out_overdue(recovery)
    for attempt_id, run_id, step_id, token in await queries.expired_attempts(now):
        counts["expired"] += int(await recovery.expire_lease(run_id, step_id, attempt_id, token))
    ready = await queries.ready_steps(grace)
    ready += await queries.waits_past_timeout(grace)
    queued = await queries.queued_runs(grace)
    waiting_parents = await queries.waiting_parents(grace)
    for run_id, step_id in ready:
        await dispatcher.dispatch_step(str(run_id), step_id)
        counts["redispatched"] += 1
    for parent_id in waiting_parents:
        await dispatcher.dispatch_advance(str(parent_id))
        counts["woken"] += 1
    limited: set[uuid.UUID] = set()
    for run_id, workflow_id, settings in queued:
        if WorkflowSettings.from_raw(settings).max_concurrent_runs:
            limited.add(workflow_id)
            continue
        await dispatcher.dispatch_advance(str(run_id))
        counts["started"] += 1
    for workflow_id in limited:
        counts["started"] += await recovery.admit_queued(workflow_id)
    return counts
