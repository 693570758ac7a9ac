"""Recovery: the sweeper's pass over PostgreSQL, the truth (DESIGN.md: anything lost in
Redis, or with a worker, is recovered from PostgreSQL).

Run periodically by the leader-elected scheduler (and by ``railyard worker`` when asked
to sweep); every rule is idempotent, so two passes at once only cost work.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import select

from backend.db.models import Attempt, Run, StepRun, Workflow
from backend.db.run_store import finish_attempt, load_state, lock_run, save_state
from backend.engine.states import RunStatus, StepStatus
from backend.services.deadlines import time_out_overdue
from backend.services.execution import Execution


async def sweep(execution: Execution, *, grace_seconds: float = 5.0) -> dict[str, int]:
    """One recovery pass. Returns counts: ``expired``, ``redispatched``, ``started``,
    ``woken``, ``timed_out``.

    - running attempts whose lease ran out are expired and their step made ready again
      (a lost worker is not the step's failure, so it does not use up retries);
    - ready steps due for longer than ``grace_seconds`` are dispatched again (a lost job);
    - runs past their run timeout (``deadline_at``) are timed out;
    - queued runs older than ``grace_seconds`` are advanced (child runs included); for
      a workflow with ``max_concurrent_runs`` the oldest queued runs that fit start;
    - parents whose calling step still runs although a child ended more than
      ``grace_seconds`` ago are advanced (a lost wake-up job).
    Due durable timers are ready steps, so the second rule fires them.
    """
    now = execution.clock.now()
    grace = now - timedelta(seconds=grace_seconds)
    counts = {"expired": 0, "redispatched": 0, "started": 0, "woken": 0, "timed_out": 0}
    counts["timed_out"] = await time_out_overdue(execution)
    async with execution.sessionmaker() as session:
        expired = (
            await session.execute(
                select(Attempt.id, Attempt.run_id, Attempt.step_id, Attempt.fencing_token)
                .where(Attempt.status == "running", Attempt.lease_expires_at < now)
                .limit(500)
            )
        ).all()
    for attempt_id, run_id, step_id, token in expired:
        async with execution.sessionmaker() as session, session.begin():
            run = await lock_run(session, run_id)
            if run is None:
                continue
            if not await finish_attempt(
                session,
                attempt_id,
                token,
                status="expired",
                output=None,
                error={"message": "lease expired: worker lost", "kind": "lease_expired"},
                now=now,
            ):
                continue
            state = await load_state(session, run)
            rec = state.steps.get(step_id)
            if rec is not None and rec.status == StepStatus.RUNNING and not state.status.terminal:
                rec.move(StepStatus.READY)
                rec.not_before = now
                state.touch(step_id)
                state.emit("step.lease_expired", step_id, attempt_id=attempt_id)
                await save_state(session, run, state)
            counts["expired"] += 1
        await execution.dispatcher.dispatch_step(str(run_id), step_id)
    async with execution.sessionmaker() as session:
        ready = (
            await session.execute(
                select(StepRun.run_id, StepRun.step_id)
                .join(Run, Run.id == StepRun.run_id)
                .where(
                    StepRun.status == StepStatus.READY.value,
                    StepRun.not_before < grace,
                    Run.status.in_([RunStatus.RUNNING.value, RunStatus.WAITING.value]),
                )
                .limit(1000)
            )
        ).all()
        queued = (
            await session.execute(
                select(Run.id, Run.workflow_id, Workflow.settings)
                .join(Workflow, Workflow.id == Run.workflow_id)
                .where(Run.status == RunStatus.QUEUED.value, Run.created_at < grace)
                .limit(1000)
            )
        ).all()
        waiting_parents = (
            (
                await session.execute(
                    select(Run.parent_run_id)
                    .join(
                        StepRun,
                        (StepRun.run_id == Run.parent_run_id)
                        & (StepRun.step_id == Run.parent_step_id),
                    )
                    .where(
                        Run.status.in_([s.value for s in RunStatus if s.terminal]),
                        Run.finished_at < grace,
                        StepRun.status == StepStatus.RUNNING.value,
                    )
                    .distinct()
                    .limit(1000)
                )
            )
            .scalars()
            .all()
        )
    for run_id, step_id in ready:
        await execution.dispatcher.dispatch_step(str(run_id), step_id)
        counts["redispatched"] += 1
    for parent_id in waiting_parents:
        await execution.dispatcher.dispatch_advance(str(parent_id))
        counts["woken"] += 1
    limited: set[uuid.UUID] = set()
    for run_id, workflow_id, settings in queued:
        if (settings or {}).get("max_concurrent_runs"):
            limited.add(workflow_id)
            continue
        await execution.dispatcher.dispatch_advance(str(run_id))
        counts["started"] += 1
    for workflow_id in limited:
        counts["started"] += await execution.admit_queued(workflow_id)
    return counts
