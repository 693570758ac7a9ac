"""Run control: advance, pause, resume, cancel, time out, re-run.

Each operation is one locked transition (backend/services/execution/transition.py) whose
decision is a pure engine call; re-run starts a new run through the start use case.
"""

from __future__ import annotations

import uuid

from backend.engine import orchestrator
from backend.engine.states import RunStatus, StepStatus
from backend.services.execution.starts import StartedRun, Starts, VersionRef
from backend.services.execution.transition import (
    Change,
    Env,
    Locked,
    RunNotActive,
    RunNotFound,
    Transitions,
)


class Control:
    """The run-control use case (see the module doc)."""

    def __init__(self, env: Env, transitions: Transitions, starts: Starts) -> None:
        self.env = env
        self.transitions = transitions
        self.starts = starts

    async def advance_run(self, run_id: uuid.UUID) -> None:
        """Advance a run (after recovery, a child's end, a lost job); a queued run starts
        when its workflow's concurrency limit allows (else the oldest queued ones that
        fit). A run that does not exist is ignored."""
        async with self.env.store.transaction() as tx:
            peek = await tx.peek(run_id)
        if peek is None:
            return
        status, workflow_id = peek
        if status == RunStatus.QUEUED.value:
            await self.starts.start_or_admit(run_id, workflow_id)
            return

        async def decide(run: Locked) -> Change:
            return Change(dispatch=orchestrator.advance(run.graph, run.state, run.now))

        try:
            await self.transitions.locked(run_id, decide)
        except RunNotFound:
            pass

    async def pause_run(self, run_id: uuid.UUID) -> None:
        """Pause a running or waiting run: nothing new starts; running attempts finish.

        Raises :class:`RunNotFound` or :class:`RunNotActive` (the run is not running or
        waiting).
        """

        async def decide(run: Locked) -> Change:
            state = run.state
            if state.status not in (RunStatus.RUNNING, RunStatus.WAITING):
                raise RunNotActive(f"run is {state.status.value}; only active runs pause")
            state.move(RunStatus.PAUSED)
            state.emit("run.paused", at=run.now.isoformat())
            return Change()

        await self.transitions.locked(run_id, decide)

    async def resume_run(self, run_id: uuid.UUID) -> None:
        """Resume a paused run: advance it and dispatch every ready step again.

        Raises :class:`RunNotFound` or :class:`RunNotActive` (the run is not paused).
        """

        async def decide(run: Locked) -> Change:
            state = run.state
            if state.status != RunStatus.PAUSED:
                raise RunNotActive(f"run is {state.status.value}; only paused runs resume")
            state.move(RunStatus.RUNNING)
            state.emit("run.resumed")
            dispatch = orchestrator.advance(run.graph, state, run.now)
            dispatch += [
                sid
                for sid, rec in state.steps.items()
                if rec.status == StepStatus.READY and sid not in dispatch
            ]
            return Change(dispatch=dispatch)

        await self.transitions.locked(run_id, decide)

    async def cancel_run(self, run_id: uuid.UUID, reason: str) -> bool:
        """Cancel a run that has not ended. Returns False when it had already ended.
        Raises :class:`RunNotFound`."""

        async def decide(run: Locked) -> Change | None:
            if run.state.status.terminal:
                return Change(result=False, write=False)
            orchestrator.cancel(run.state, run.now, reason)
            await run.tx.cancel_running_attempts(run.row.id, run.now)
            return Change(result=True)

        change = await self.transitions.locked(run_id, decide)
        return bool(change is not None and change.result)

    async def timeout_run(self, run_id: uuid.UUID) -> bool:
        """End a run whose run timeout (``runs.deadline_at``) has passed: ``timed_out``.

        Running attempts are cancelled (their workers see it at the next heartbeat: the
        SDK's ``is_cancelled()`` turns true and the action task is cancelled; a late
        completion is discarded), unfinished children are cancelled, the error workflow
        starts. Returns False when the run already ended or is not overdue. Raises
        :class:`RunNotFound`.
        """

        async def decide(run: Locked) -> Change | None:
            row = run.row
            if run.state.status.terminal or row.deadline_at is None or row.deadline_at > run.now:
                return Change(result=False, write=False)
            seconds = (row.deadline_at - (row.started_at or row.created_at)).total_seconds()
            orchestrator.time_out(run.state, run.now, f"run timed out after {seconds:g} s")
            await run.tx.cancel_running_attempts(row.id, run.now)
            return Change(result=True)

        change = await self.transitions.locked(run_id, decide)
        return bool(change is not None and change.result)

    async def rerun(
        self,
        run_id: uuid.UUID,
        *,
        start_from: str,
        user_id: uuid.UUID | None = None,
    ) -> StartedRun:
        """Start a new run repeating ended run ``run_id`` (linked by ``rerun_of``).

        ``start_from="failed_step"``: same version, same input; the original's succeeded
        steps (not downstream of a failure) are copied with their outputs and execution
        resumes at the failed step(s); only for failed, timed-out or cancelled runs.
        ``start_from="start"``: the workflow's current active version with the original
        input. Raises :class:`RunNotFound`,
        :class:`RunNotActive` (the run has not ended, did not fail, or the workflow has no
        active version) or ``ValueError`` for another ``start_from``.
        """
        if start_from not in ("failed_step", "start"):
            raise ValueError(f'"from" must be "failed_step" or "start", got {start_from!r}')
        found = await self.env.store.rerun_source(run_id, latest=start_from == "start")
        if found is None:
            raise RunNotFound(f"run {run_id} not found")
        status, run_input, version = found
        if not RunStatus(status).terminal:
            raise RunNotActive(f"run is {status}; only ended runs can be re-run")
        if start_from == "failed_step" and status == RunStatus.SUCCEEDED.value:
            raise RunNotActive("run succeeded; it has no failed step to re-run from")
        if version is None:
            raise RunNotActive("the workflow has no active version to re-run")
        chosen: VersionRef = version
        return await self.starts.start_run(
            chosen,
            run_input,
            trigger="rerun",
            user_id=user_id,
            rerun_of=run_id,
            copy_steps_from=run_id if start_from == "failed_step" else None,
        )
