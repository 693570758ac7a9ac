"""Start and admission: how a run is stored and started.

The start's decision is :meth:`Starts.decide_start` (pure over the new run's state): the
trigger step completed, inline steps evaluated within the inline budget
(:class:`~backend.services.runs.execution.inline_budget.Overruns`: a version whose last start
ran out of it evaluates one inline step and hands the rest to a worker at once), the
first action steps ready, and for a caller waiting for the answer the one ready action
step claimed for this process. The run writer (backend/services/runs/execution/writer.py)
writes it: a new run has no rows to lock, so without a concurrency limit, copied steps,
an audit row, child runs or an immediate failure ONE autocommit statement stores run,
step records and events, fenced by the workflow settings it was decided from (decided
again when they changed). Otherwise the start is written in a transaction
(:meth:`Starts.start_in_transaction`): the run inserted ``queued`` and started, or, under
a limit, the workflow's oldest queued runs that fit admitted. Admission takes the
workflow's advisory lock before it writes anything, so concurrent starts of one workflow
queue behind each other instead of deadlocking (docs/engine.md, "Run control").
"""

from __future__ import annotations

import functools
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from backend.engine import orchestrator
from backend.engine.expression_slice import loop_slice
from backend.engine.model import RunState
from backend.engine.ports import (
    DuplicateRun,
    NewRun,
    RunRow,
    RunTransaction,
    WorkflowSettings,
)
from backend.engine.states import RunStatus, StepStatus
from backend.services.runs.execution.inline_budget import (
    INLINE_BUDGET_SECONDS,
    InlineBudget,
    Overruns,
)
from backend.services.runs.execution.parent_parts import parent_parts
from backend.services.runs.execution.step_changes import (
    Claimed,
    claim_change,
    claimed_from,
    inline_candidate,
)
from backend.services.runs.execution.transition import AuditHook, Change, Env, Followup, has_calls
from backend.services.runs.execution.writer import RunWriter, Started
from designer_schema.graph import WorkflowGraph

__all__ = ["INLINE_BUDGET_SECONDS", "InlineBudget", "StartedRun", "Starts"]

_SETTINGS_CACHE_SIZE = 1024


class VersionRef(Protocol):
    """What a start needs of a workflow version (a ``WorkflowVersion`` row has it)."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def workflow_id(self) -> uuid.UUID: ...

    @property
    def number(self) -> int: ...


@dataclass
class Replay:
    """A replay's restart point: ``step_id`` runs again with ``input`` (JSON-able)."""

    step_id: str
    input: Any


@dataclass
class StartedRun:
    """Result of :meth:`Starts.start_run`; ``created`` is False for an idempotent replay.
    ``eager``: the attempt of the action step the start claimed for this process to run
    itself (a place of its eager budget is reserved for it;
    backend/services/runs/execution/eager.py), ``None`` when the start dispatched its steps as
    usual."""

    run_id: uuid.UUID
    status: str
    created: bool
    eager: Claimed | None = None


class Starts:
    """The start-and-admission use case (see the module doc)."""

    def __init__(self, env: Env, writer: RunWriter) -> None:
        self.env = env
        self.writer = writer
        self._settings: OrderedDict[uuid.UUID, WorkflowSettings] = OrderedDict()
        self.overruns = Overruns()

    async def start_run(
        self,
        version: VersionRef,
        input: Any,
        *,
        trigger: str,
        idempotency_key: str | None = None,
        user_id: uuid.UUID | None = None,
        rerun_of: uuid.UUID | None = None,
        copy_steps_from: uuid.UUID | None = None,
        audit: AuditHook | None = None,
        replay: Replay | None = None,
        run_id: uuid.UUID | None = None,
        eager: bool = False,
    ) -> StartedRun:
        """Store and start a run of ``version`` with ``input`` (JSON-able), with id
        ``run_id`` when the caller chose it (a fresh UUID 4; else one is drawn here).

        ``eager`` (the caller waits for the run's answer): when the one-statement start
        leaves exactly one action step ready now and the process's eager budget has room,
        that step is not dispatched: the same statement claims it for this process
        (``StartedRun.eager``, run by
        :meth:`backend.services.runs.execution.service.Execution.start_run`).

        With ``idempotency_key``, a second call with the same key returns the first run
        (``created=False``) instead of starting another. When the workflow's
        ``max_concurrent_runs`` is reached, the run is stored ``queued`` and starts when a
        slot frees (oldest first). ``rerun_of`` links the run it repeats;
        ``copy_steps_from`` (a run of the same version) copies that run's succeeded step
        records not downstream of a failure, so execution resumes at the failed step(s);
        with ``replay`` it copies the records not downstream of ``replay.step_id`` and that
        step runs again with ``replay.input``. ``audit`` adds the start's audit row in the
        run's transaction (such starts take the locked path); an idempotent start records
        nothing. A large input is stored once
        by reference (backend/db/payloads.py).
        """
        now = self.env.clock.now()
        version_graph = await self.env.store.graph(version.id)
        calls = has_calls(version_graph)
        new = NewRun(
            id=run_id or uuid.uuid4(),
            workflow_id=version.workflow_id,
            version_id=version.id,
            version_number=version.number,
            trigger=trigger,
            input=input,
            created_at=now,
            created_by=user_id,
            idempotency_key=idempotency_key,
            rerun_of=rerun_of,
            by_reference=parent_parts(input) if calls else (),
        )
        budgets: list[InlineBudget] = []

        def decide(graph: WorkflowGraph, state: RunState, now: datetime) -> Change:
            budget = self.overruns.budget(new.version_id)
            budgets.append(budget)
            return self.decide_start(graph, state, new, now, budget, eager=eager)

        async def locked() -> Started:
            return await self.start_in_transaction(new, copy_steps_from, audit, replay)

        try:
            started, change = await self.writer.start(
                new,
                decide,
                functools.partial(self.settings, new.workflow_id),
                locked=locked,
                refresh=functools.partial(self._remember, new.workflow_id),
                copied=copy_steps_from is not None,
                audited=audit is not None,
            )
        except DuplicateRun:
            run_id, status = await self.env.store.run_by_idempotency_key(str(idempotency_key))
            return StartedRun(run_id, status, False)
        mine = None
        if change is not None:  # the fenced insert wrote it
            self.overruns.record(new.version_id, budgets[-1])
            state = change.result
            row = started_row(new, state, change.revision or 0)
            mine = claimed_from(version_graph, state, change, row, row.workflow_id, row.version_id)
        status = RunStatus.QUEUED.value
        for run_id, followup, run_status in started:
            if run_id == new.id:
                status = run_status
            await self.writer.after_commit(str(run_id), followup, followup.state)
        return StartedRun(new.id, status, True, mine)

    def decide_start(
        self,
        graph: WorkflowGraph,
        state: RunState,
        new: NewRun,
        now: datetime,
        budget: InlineBudget,
        *,
        eager: bool,
    ) -> Change:
        """THE start decision of new run ``new`` (``state``: queued, no steps) at ``now``
        within ``budget``: ``orchestrator.start``, and with ``eager`` the claim of its one
        ready action step for this process (a place of the eager budget reserved for it:
        ``Change.start``; released when the claim's config failed to resolve).
        ``Change.result`` is ``state``; ``Change.advance`` when inline work is left to a
        worker."""
        with loop_slice() as sliced:  # a step too long for here is left for a worker
            dispatch = orchestrator.start(graph, state, now, should_yield=budget)
        budget.deferred = sliced.deferred
        change = Change(dispatch=dispatch)
        claim = None
        if eager and not budget.left_work:
            claim = self._eager_claim(graph, state, new, dispatch, now)
        if claim is not None and claim.start is None:  # its config failed to resolve
            self.env.eager.release()
            change.dispatch = claim.dispatch
        elif claim is not None:  # claimed here: not dispatched
            change = claim
        change.advance = budget.left_work
        change.result = state
        return change

    def _eager_claim(
        self, graph: WorkflowGraph, state: RunState, new: NewRun, dispatch: list[str], now: datetime
    ) -> Change | None:
        """The claim of the start's one ready action step for this process (the same
        :func:`~backend.services.runs.execution.step_changes.claim_change` a worker's claim
        computes), with a place of the eager budget reserved for it; ``None`` (nothing
        reserved, ``state`` unchanged) when the start leaves no such step or the budget
        has no room."""
        step = inline_candidate(graph, state, dispatch, now)
        if step is None or not self.env.eager.reserve():
            return None
        worker, lease = self.env.worker, self.env.lease_seconds
        return claim_change(graph, state, step, new.id, now, worker, lease)

    async def start_in_transaction(
        self,
        new: NewRun,
        copy_steps_from: uuid.UUID | None,
        audit: AuditHook | None = None,
        replay: Replay | None = None,
    ) -> Started:
        """The start in a transaction: insert ``new`` queued (copying steps for a re-run,
        with its audit row), then start it, or admit the workflow's oldest queued runs
        under its limit."""
        now = new.created_at or self.env.clock.now()
        async with self.env.store.transaction() as tx:
            settings = self._remember(new.workflow_id, await tx.settings(new.workflow_id))
            if settings.max_concurrent_runs:
                await tx.lock_admission(new.workflow_id)  # before any write: one lock order
                # stamped once admission is ours, so creation order is admission order
                now = new.created_at = self.env.clock.now()
            new.deadline_at = None
            await tx.insert_run(new)
            await tx.add_event(new.id, "run.created", {"trigger": new.trigger})
            if copy_steps_from is not None:
                await self._copy_steps(tx, new, copy_steps_from, replay)
            if audit is not None:
                await tx.add_audit(audit(new.id, new.workflow_id, new.version_number))
            if settings.max_concurrent_runs:
                budget = InlineBudget(INLINE_BUDGET_SECONDS)  # shared by the runs admitted
                return await self.admit(tx, new.workflow_id, settings, budget)
            budget = self.overruns.budget(new.version_id)
            started = await self.start_queued(tx, new.id, settings, now, budget)
        if started is None:
            return []
        self.overruns.record(new.version_id, budget)
        return [started]

    async def start_queued(
        self,
        tx: RunTransaction,
        run_id: uuid.UUID,
        settings: WorkflowSettings,
        now: datetime,
        budget: InlineBudget | None = None,
    ) -> tuple[uuid.UUID, Followup, str] | None:
        """Start queued run ``run_id`` in ``tx``: the trigger step completes, the first
        steps become ready, the run timeout's due time is set. ``None`` when the run is
        gone or no longer queued. With ``budget`` (a start on the API's event loop) the
        inline steps left when it is spent are handed to a worker."""
        row = await tx.lock(run_id)
        if row is None or row.status != RunStatus.QUEUED.value:
            return None
        graph = await tx.graph(row.version_id)
        state = await tx.load(row, children=has_calls(graph))
        if budget is None:
            dispatch = orchestrator.start(graph, state, now)
        else:
            with loop_slice() as sliced:  # a step too long for here is left for a worker
                dispatch = orchestrator.start(graph, state, now, should_yield=budget)
            budget.deferred = budget.deferred or sliced.deferred
        change = Change(
            dispatch=dispatch,
            deadline_at=settings.deadline(now),
            advance=budget is not None and budget.left_work,
        )
        followup = await self.writer.persist(tx, row, state, graph, change, now)
        return run_id, followup, state.status.value

    async def admit(
        self,
        tx: RunTransaction,
        workflow_id: uuid.UUID,
        settings: WorkflowSettings,
        budget: InlineBudget | None = None,
    ) -> Started:
        """Start the oldest queued runs of a workflow while fewer than its limit are
        active (all of them without a limit), in creation order. The caller holds the
        workflow's admission lock (:meth:`~backend.engine.ports.RunTransaction.lock_admission`).

        The start instant is read after the active runs were counted, so a run never
        starts (``started_at``) before the end of the run whose slot it takes."""
        limit = settings.max_concurrent_runs or 1_000_000
        free = limit - await tx.active_count(workflow_id)
        now = self.env.clock.now()
        started: Started = []
        if free <= 0:
            return started
        for queued_id in await tx.oldest_queued(workflow_id, free):
            entry = await self.start_queued(tx, queued_id, settings, now, budget)
            if entry is not None:
                started.append(entry)
        return started

    async def admit_queued(self, workflow_id: uuid.UUID) -> int:
        """Start the oldest queued runs of ``workflow_id`` that fit its concurrency limit
        (all of them when it has none). Returns how many started."""
        async with self.env.store.transaction() as tx:
            await tx.lock_admission(workflow_id)
            settings = self._remember(workflow_id, await tx.settings(workflow_id))
            started = await self.admit(tx, workflow_id, settings)
        for run_id, followup, _ in started:
            await self.writer.after_commit(str(run_id), followup)
        return len(started)

    async def start_or_admit(self, run_id: uuid.UUID, workflow_id: uuid.UUID) -> None:
        """Start queued run ``run_id`` (advance of a queued run): under a concurrency
        limit, admit the workflow's oldest queued runs that fit instead."""
        async with self.env.store.transaction() as tx:
            settings = self._remember(workflow_id, await tx.settings(workflow_id))
            if settings.max_concurrent_runs:
                await tx.lock_admission(workflow_id)
                started = await self.admit(tx, workflow_id, settings)
            else:
                entry = await self.start_queued(tx, run_id, settings, self.env.clock.now())
                started = [entry] if entry is not None else []
        for started_id, followup, _ in started:
            await self.writer.after_commit(str(started_id), followup)

    async def settings(self, workflow_id: uuid.UUID) -> WorkflowSettings:
        """The workflow's settings as last seen by this process (read once, then kept
        current by every write that checks them and every locked start)."""
        known = self._settings.get(workflow_id)
        if known is not None:
            self._settings.move_to_end(workflow_id)
            return known
        async with self.env.store.transaction() as tx:
            return self._remember(workflow_id, await tx.settings(workflow_id))

    def _remember(self, workflow_id: uuid.UUID, settings: WorkflowSettings) -> WorkflowSettings:
        self._settings[workflow_id] = settings
        self._settings.move_to_end(workflow_id)
        if len(self._settings) > _SETTINGS_CACHE_SIZE:
            self._settings.popitem(last=False)
        return settings

    async def _copy_steps(
        self,
        tx: RunTransaction,
        new: NewRun,
        source_id: uuid.UUID,
        replay: Replay | None = None,
    ) -> None:
        """Copy the succeeded step records of run ``source_id`` into new run ``new``.

        A succeeded step downstream of a step that did not succeed (failed, cancelled,
        unfinished; also an error-port branch) is not copied: it runs again after the
        failed step. Skipped steps are not copied either (dead-path elimination decides
        them again). With ``replay``, its step and everything downstream of it run again
        too, and the step gets a pending record holding its edited input.
        """
        graph = await tx.graph(new.version_id)
        outcomes = await tx.step_outcomes(source_id)
        if replay is not None:
            outcomes[replay.step_id] = StepStatus.PENDING.value
        copied = steps_to_copy(graph, outcomes)
        await tx.copy_steps(source_id, new.id, copied)
        await tx.add_event(
            new.id, "run.steps_copied", {"from_run_id": str(source_id), "steps": copied}
        )
        if replay is not None and replay.step_id != graph.trigger:
            await tx.seed_step(new.id, replay.step_id, {orchestrator.INPUT_OVERRIDE: replay.input})
            await tx.add_event(
                new.id, "run.replay", {"from_run_id": str(source_id), "step_id": replay.step_id}
            )


def steps_to_copy(graph: WorkflowGraph, outcomes: dict[str, str]) -> list[str]:
    """Steps of a re-run copied from the original (``outcomes``: step id -> status):
    succeeded steps not downstream of a step that did not succeed or was skipped."""
    done = (StepStatus.SUCCEEDED.value, StepStatus.SKIPPED.value)
    dirty: set[str] = set()
    todo = [s.id for s in graph.steps if outcomes.get(s.id) not in done]
    while todo:
        sid = todo.pop()
        if sid in dirty:
            continue
        dirty.add(sid)
        todo.extend(t.target for t in graph.outgoing(sid))
    return [
        s.id
        for s in graph.steps
        if s.id not in dirty and outcomes.get(s.id) == StepStatus.SUCCEEDED.value
    ]


def started_row(new: NewRun, state: RunState, revision: int) -> RunRow:
    """The row of run ``new`` as its one-statement start wrote it with ``state``."""
    return RunRow(
        id=new.id,
        workflow_id=new.workflow_id,
        version_id=new.version_id,
        version_number=new.version_number,
        status=state.status.value,
        trigger=new.trigger,
        input=new.input,
        created_by=new.created_by,
        created_at=new.created_at or state.started_at or datetime.now(UTC),
        started_at=state.started_at,
        deadline_at=new.deadline_at,
        parent_run_id=new.parent_run_id,
        revision=revision,
    )
