"""Run control: advance, pause, resume, cancel, time out, fail, re-run.

Each operation is one decision (backend/services/runs/execution/decisions.py) applied by the
run writer (backend/services/runs/execution/writer.py); re-run starts a new run through the
start use case. ``audit`` (pause, resume, cancel, re-run) is the request's audit row,
committed with the change. Ending a run (cancel, time out, fail) stops its running
attempts at once once committed: this process's directly, other workers' through a
cancel notice (backend/services/runs/cancellation.py; done by the writer).
"""

from __future__ import annotations

import uuid
from typing import Any

from backend.engine.ports import HeldSteps
from backend.engine.states import RunStatus, StepStatus
from backend.services.runs.execution import decisions
from backend.services.runs.execution.starts import Replay, StartedRun, Starts, VersionRef
from backend.services.runs.execution.transition import (
    AuditHook,
    Change,
    Decide,
    Env,
    RunNotActive,
    RunNotFound,
    RunView,
)
from backend.services.runs.execution.writer import RunWriter


class StepNotReplayable(ValueError):
    """The step named for a replay is not in the run's graph or was never reached."""


_NOT_REACHED = (StepStatus.PENDING.value, StepStatus.SKIPPED.value)


class Control:
    """The run-control use case (see the module doc)."""

    def __init__(self, env: Env, writer: RunWriter, starts: Starts) -> None:
        self.env = env
        self.writer = writer
        self.starts = starts
        # runs this process is advancing -> whether another advance was asked meanwhile
        self._advancing: dict[uuid.UUID, bool] = {}

    async def advance_run(self, run_id: uuid.UUID) -> None:
        """Advance a run (after recovery, a child's end, a lost job); a queued run starts
        when its workflow's concurrency limit allows (else the oldest queued ones that
        fit). A run that does not exist is ignored.

        Advances of one run asked while this process advances it are folded into one
        more pass after the current one (single flight with a repeat): the children of a
        For-each that end together wake their parent once per pass, not once each, and
        never queue on the parent's row lock in this process. Nothing is lost: the repeat
        starts after the current pass committed and reads the run again, so it sees
        every child that ended before its wake-up was asked."""
        if run_id in self._advancing:
            self._advancing[run_id] = True
            return
        self._advancing[run_id] = False
        held: HeldSteps | None = None
        try:
            while True:
                held = await self._advance_once(run_id, held)
                if not self._advancing[run_id]:
                    return
                self._advancing[run_id] = False
        finally:
            del self._advancing[run_id]

    async def _advance_once(self, run_id: uuid.UUID, held: HeldSteps | None) -> HeldSteps | None:
        """One pass of :meth:`advance_run`; returns the step records it wrote, held for
        the repeat (``None`` when it wrote none).

        ``held`` are the records the previous pass of this loop wrote: when the run's
        revision is still that write's (no other write since, checked under the lock) the
        pass uses them instead of reading and decoding its step rows again. A For-each
        parent woken by its children pass after pass so decodes its ~100 kB item list
        once per wake-up loop, not once per pass. Records a pass changed without writing
        them (it raised, or decided to write nothing) are never held."""
        async with self.env.store.transaction() as tx:
            peek = await tx.peek(run_id)
        if peek is None:
            return None
        status, workflow_id = peek
        if status == RunStatus.QUEUED.value:
            await self.starts.start_or_admit(run_id, workflow_id)
            return None
        seen: list[RunView] = []
        advance = decisions.advance()

        def decide(run: RunView) -> Change | None:
            seen.append(run)
            return advance(run)

        try:
            change = await self.writer.apply(run_id, decide, held=held)
        except RunNotFound:
            return None
        if (
            change is None
            or not change.write
            or not seen
            or change.revision in (None, seen[-1].row.revision)
        ):
            return None
        return HeldSteps(change.revision, seen[-1].state.steps, seen[-1].state.stored)

    async def pause_run(self, run_id: uuid.UUID, audit: AuditHook | None = None) -> None:
        """Pause a running or waiting run: nothing new starts; running attempts finish.

        Raises :class:`RunNotFound` or :class:`RunNotActive` (the run is not running or
        waiting). ``audit`` adds the audit row in the pausing transaction.
        """

        await self.writer.apply(run_id, decisions.pause(audit))

    async def resume_run(self, run_id: uuid.UUID, audit: AuditHook | None = None) -> None:
        """Resume a paused run: advance it and dispatch every ready step again.

        Raises :class:`RunNotFound` or :class:`RunNotActive` (the run is not paused).
        ``audit`` adds the audit row in the resuming transaction.
        """

        await self.writer.apply(run_id, decisions.resume(audit))

    async def cancel_run(
        self, run_id: uuid.UUID, reason: str, audit: AuditHook | None = None
    ) -> bool:
        """Cancel a run that has not ended. Returns False when it had already ended.
        Raises :class:`RunNotFound`. ``audit`` adds the audit row in the cancelling
        transaction (not for an ended run). Its running attempts stop at once."""

        return await self._end_run(run_id, decisions.cancel(reason, audit))

    async def timeout_run(self, run_id: uuid.UUID) -> bool:
        """End a run whose run timeout (``runs.deadline_at``) has passed: ``timed_out``.

        Running attempts are cancelled and stopped at once (a cancel notice reaches
        their workers, backend/services/runs/cancellation.py; the next heartbeat is the
        backstop: the SDK's ``is_cancelled()`` turns true and the action task is
        cancelled; a late completion is discarded), unfinished children are cancelled,
        the error workflow starts. Returns False when the run already ended or is not
        overdue. Raises :class:`RunNotFound`.
        """

        return await self._end_run(run_id, decisions.time_out())

    async def fail_run(self, run_id: uuid.UUID, error: dict[str, Any]) -> bool:
        """End a run that has not ended as ``failed`` with ``error`` (``{"message",
        "kind"}``): for a run whose next state the database deterministically refuses, so
        that it is not retried forever. False when it had already ended. Raises
        :class:`RunNotFound`. Its running attempts stop at once."""

        return await self._end_run(run_id, decisions.fail(error))

    async def _end_run(self, run_id: uuid.UUID, decide: Decide) -> bool:
        """The decision ``decide`` ending a run; True when it ended it (the writer then
        stops the run's running attempts)."""
        change = await self.writer.apply(run_id, decide)
        return bool(change is not None and change.result)

    async def rerun(
        self,
        run_id: uuid.UUID,
        *,
        start_from: str,
        user_id: uuid.UUID | None = None,
        audit: AuditHook | None = None,
    ) -> StartedRun:
        """Start a new run repeating ended run ``run_id`` (linked by ``rerun_of``).

        ``start_from="failed_step"``: same version, same input; the original's succeeded
        steps (not downstream of a failure) are copied with their outputs and execution
        resumes at the failed step(s); only for failed, timed-out or cancelled runs.
        ``start_from="start"``: the workflow's current active version with the original
        input. Raises :class:`RunNotFound`,
        :class:`RunNotActive` (the run has not ended, did not fail, or the workflow has no
        active version) or ``ValueError`` for another ``start_from``. ``audit`` is handed
        to the start (called with the new run).
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
            audit=audit,
        )

    async def replay(
        self,
        run_id: uuid.UUID,
        *,
        step_id: str,
        input: Any,
        user_id: uuid.UUID | None = None,
        audit: AuditHook | None = None,
    ) -> StartedRun:
        """Start a new run of ended run ``run_id``'s version (linked by ``rerun_of``)
        from step ``step_id``, which runs with ``input`` instead of its recorded input.

        The original's succeeded steps not downstream of ``step_id`` are copied with their
        outputs (as for a re-run from the failed step); ``step_id`` and everything after it
        run again. Replaying from the trigger starts the version afresh with ``input`` as
        the run input. Raises :class:`RunNotFound`, :class:`RunNotActive` (the run has not
        ended) or :class:`StepNotReplayable` (no such step in the run's graph, or it was
        never reached in the run: pending or skipped).
        """
        found = await self.env.store.rerun_source(run_id, latest=False)
        if found is None:
            raise RunNotFound(f"run {run_id} not found")
        status, run_input, version = found
        if not RunStatus(status).terminal:
            raise RunNotActive(f"run is {status}; only ended runs can be replayed")
        assert version is not None  # the run's own version always exists
        async with self.env.store.transaction() as tx:
            graph = await tx.graph(version.id)
            outcomes = await tx.step_outcomes(run_id)
        if step_id not in {s.id for s in graph.steps}:
            raise StepNotReplayable(f"step {step_id!r} is not in the run's workflow version")
        if outcomes.get(step_id, StepStatus.PENDING.value) in _NOT_REACHED:
            raise StepNotReplayable(f"step {step_id!r} was not reached in run {run_id}")
        from_trigger = step_id == graph.trigger
        return await self.starts.start_run(
            version,
            input if from_trigger else run_input,
            trigger="replay",
            user_id=user_id,
            rerun_of=run_id,
            copy_steps_from=None if from_trigger else run_id,
            audit=audit,
            replay=None if from_trigger else Replay(step_id, input),
        )
