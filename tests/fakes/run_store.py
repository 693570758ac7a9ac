"""An in-memory :class:`~backend.engine.ports.RunStore` for tests of the execution use
cases without a database.

It keeps what the PostgreSQL store keeps (backend/db/run_store.py): runs with their row
fields and ``revision``, step records, attempts with their fencing tokens and leases,
events, workflows with their settings, versions and compiled graphs, and it answers the
port's methods with the same meaning, which tests/integration/test_run_store_contract.py
checks against both stores:

- a transaction (:meth:`MemoryRunStore.transaction`) holds the store for its task until
  it ends (the other tasks' transactions and one-statement writes wait, as they would
  for PostgreSQL's row and admission locks) and is rolled back when its block raises;
- every write bumps the run's ``revision``; a write fenced by ``expected_revision``
  finds the run ``moved`` when it is not there; closing an attempt whose fencing token
  no longer holds writes nothing (``StaleAttempt`` from :meth:`MemoryRunTransaction.save`);
- values are copied in and out, so a caller's later change of a state it wrote or read
  never changes what is stored.

Not kept: large values by reference (nothing is large in memory), search and retention
columns, grants (:meth:`MemoryRunTransaction.publisher_refusal` refuses no called
workflow). Audit rows added with a change are kept in ``tables.audit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from backend.engine.model import ChildRun, ChildSummary, RunState, StepRecord
from backend.engine.ports import (
    AuditEntry,
    DuplicateRun,
    FinishedAttempt,
    HeldSteps,
    NewAttempt,
    NewRun,
    OutputsWanted,
    RunRow,
    RunStore,
    RunTransaction,
    StaleAttempt,
    VersionRow,
    WorkflowSettings,
    Written,
)
from backend.engine.states import RunStatus
from designer_schema.graph import WorkflowGraph

ACTIVE = (RunStatus.RUNNING.value, RunStatus.WAITING.value, RunStatus.PAUSED.value)
"""Run statuses holding a concurrency slot (``backend.db.run_state.ACTIVE_RUN_STATUSES``)."""


@dataclass
class StoredRun:
    """A run as stored: the row, its step records and its event log."""

    row: RunRow
    output: Any = None
    error: Any = None
    response: Any = None
    finished_at: datetime | None = None
    idempotency_key: str | None = None
    parent_step_id: str | None = None
    parent_index: int | None = None
    steps: dict[str, StepRecord] = field(default_factory=dict)
    events: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)


@dataclass
class StoredAttempt:
    """An attempt as stored."""

    id: int
    run_id: uuid.UUID
    start: NewAttempt
    status: str = "running"
    output: Any = None
    error: Any = None
    finished_at: datetime | None = None


@dataclass
class StoredWorkflow:
    """A workflow: its name, settings JSON, active version number and versions by number."""

    id: uuid.UUID
    name: str
    settings: dict[str, Any] | None = None
    active_version: int | None = None
    archived: bool = False
    versions: dict[int, uuid.UUID] = field(default_factory=dict)


@dataclass
class Tables:
    """Everything a transaction may change (copied for its rollback)."""

    runs: dict[uuid.UUID, StoredRun] = field(default_factory=dict)
    attempts: dict[int, StoredAttempt] = field(default_factory=dict)
    workflows: dict[uuid.UUID, StoredWorkflow] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)
    next_attempt: int = 1


class MemoryRunStore:
    """The in-memory run store (see the module docstring). Arrange workflows with
    :meth:`add_workflow`, :meth:`add_version` and :meth:`set_settings`; read what was
    written with :meth:`run`, :meth:`events` and :meth:`attempts_of`."""

    def __init__(self) -> None:
        self.tables = Tables()
        self.graphs: dict[uuid.UUID, tuple[uuid.UUID, int, WorkflowGraph]] = {}
        self._lock = asyncio.Lock()
        self._holder: asyncio.Task[Any] | None = None

    # arranging and reading (tests only; not part of the port)

    def add_workflow(
        self,
        graph: WorkflowGraph,
        *,
        name: str = "workflow",
        settings: dict[str, Any] | None = None,
    ) -> VersionRow:
        """A workflow with ``graph`` published as its active version 1."""
        workflow = StoredWorkflow(uuid.uuid4(), name, settings)
        self.tables.workflows[workflow.id] = workflow
        return self.add_version(workflow.id, graph)

    def add_version(self, workflow_id: uuid.UUID, graph: WorkflowGraph) -> VersionRow:
        """Publish ``graph`` as the workflow's next version and make it the active one."""
        workflow = self.tables.workflows[workflow_id]
        number = max(workflow.versions, default=0) + 1
        version_id = uuid.uuid4()
        workflow.versions[number] = version_id
        workflow.active_version = number
        self.graphs[version_id] = (workflow_id, number, graph)
        return VersionRow(version_id, workflow_id, number)

    def set_settings(self, workflow_id: uuid.UUID, settings: dict[str, Any] | None) -> None:
        """Replace the workflow's settings JSON (as saving the workflow's settings does)."""
        self.tables.workflows[workflow_id].settings = copy.deepcopy(settings)

    def run(self, run_id: uuid.UUID) -> StoredRun:
        """A copy of the stored run (KeyError when there is none)."""
        return copy.deepcopy(self.tables.runs[run_id])

    def events(self, run_id: uuid.UUID) -> list[str]:
        """The kinds of the run's events in the order they were written."""
        return [kind for kind, _step, _data in self.tables.runs[run_id].events]

    def attempts_of(self, run_id: uuid.UUID) -> list[StoredAttempt]:
        """Copies of the run's attempts in the order they were claimed."""
        found = [a for a in self.tables.attempts.values() if a.run_id == run_id]
        return copy.deepcopy(sorted(found, key=lambda a: a.id))

    # the port

    @contextlib.asynccontextmanager
    async def _held(self) -> AsyncIterator[bool]:
        """Hold the store for the current task (re-entrant); yields whether this call
        took it (the outermost one, which owns the rollback)."""
        task = asyncio.current_task()
        if self._holder is not None and self._holder is task:
            yield False
            return
        async with self._lock:
            self._holder = task
            try:
                yield True
            finally:
                self._holder = None

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[MemoryRunTransaction]:
        async with self._held() as outermost:
            before = copy.deepcopy(self.tables) if outermost else None
            try:
                yield MemoryRunTransaction(self)
            except BaseException:
                if before is not None:
                    self.tables = before
                raise

    async def graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        found = self.graphs.get(version_id)
        if found is None:
            raise LookupError(f"workflow version {version_id} not found")
        return found[2]

    def cached_graph(self, version_id: uuid.UUID) -> WorkflowGraph | None:
        found = self.graphs.get(version_id)
        return None if found is None else found[2]

    async def insert_started(
        self,
        new: NewRun,
        state: RunState,
        settings: WorkflowSettings,
        *,
        start: NewAttempt | None = None,
    ) -> Written:
        async with self._held():
            workflow = self.tables.workflows.get(new.workflow_id)
            if workflow is None:
                raise LookupError(f"workflow {new.workflow_id} not found")
            if (workflow.settings or {}) != settings.raw:
                current = WorkflowSettings.from_raw(copy.deepcopy(workflow.settings))
                return Written(None, moved=True, settings=current)
            inserted = self._insert(new, state, start)
            assert inserted is not None  # a started run's id is new
            return Written(inserted.row.revision)

    async def write_unlocked(
        self,
        run_id: uuid.UUID,
        state: RunState,
        *,
        finish: FinishedAttempt | None,
        start: NewAttempt | None,
        expected_revision: int,
    ) -> Written:
        async with self._held():
            return self._write(
                run_id, state, finish=finish, start=start, expected_revision=expected_revision
            )

    async def read_unlocked(self, run_id: uuid.UUID) -> tuple[RunRow, RunState] | None:
        async with self._held():
            stored = self.tables.runs.get(run_id)
            if stored is None:
                return None
            return stored.row, self._state(stored, copy.deepcopy(stored.steps), {}, {})

    async def read_settings(self, workflow_id: uuid.UUID) -> WorkflowSettings:
        workflow = self.tables.workflows.get(workflow_id)
        return WorkflowSettings.from_raw(copy.deepcopy(workflow.settings) if workflow else None)

    async def extend_lease(self, attempt_id: int, token: str, until: datetime) -> bool:
        async with self._held():
            attempt = self._current(attempt_id, token)
            if attempt is None:
                return False
            attempt.start.lease_expires_at = until
            return True

    async def run_by_idempotency_key(self, key: str) -> tuple[uuid.UUID, str]:
        for run in self.tables.runs.values():
            if run.idempotency_key == key:
                return run.row.id, run.row.status
        raise LookupError(f"no run holds idempotency key {key!r}")

    async def rerun_source(
        self, run_id: uuid.UUID, *, latest: bool
    ) -> tuple[str, Any, VersionRow | None] | None:
        stored = self.tables.runs.get(run_id)
        if stored is None:
            return None
        row = stored.row
        version: VersionRow | None = VersionRow(row.version_id, row.workflow_id, row.version_number)
        if latest:
            workflow = self.tables.workflows.get(row.workflow_id)
            number = workflow.active_version if workflow is not None else None
            version = None
            if workflow is not None and number is not None:
                version = VersionRow(workflow.versions[number], workflow.id, number)
        return row.status, copy.deepcopy(row.input), version

    # shared by the store and its transactions

    def _current(self, attempt_id: int, token: str) -> StoredAttempt | None:
        attempt = self.tables.attempts.get(attempt_id)
        if attempt is None or attempt.status != "running" or attempt.start.fencing_token != token:
            return None
        return attempt

    def _claim(self, run_id: uuid.UUID, start: NewAttempt) -> None:
        attempt_id = self.tables.next_attempt
        self.tables.next_attempt += 1
        self.tables.attempts[attempt_id] = StoredAttempt(attempt_id, run_id, copy.deepcopy(start))
        start.id = attempt_id

    def _insert(
        self, new: NewRun, state: RunState | None, start: NewAttempt | None
    ) -> StoredRun | None:
        """Insert run ``new`` (queued without ``state``); ``None`` when its id exists.
        Raises :class:`DuplicateRun` when its idempotency key is taken."""
        if new.id in self.tables.runs:
            return None
        key = new.idempotency_key
        if key is not None and any(r.idempotency_key == key for r in self.tables.runs.values()):
            raise DuplicateRun(key)
        row = RunRow(
            id=new.id,
            workflow_id=new.workflow_id,
            version_id=new.version_id,
            version_number=new.version_number,
            status=state.status.value if state is not None else RunStatus.QUEUED.value,
            trigger=new.trigger,
            input=copy.deepcopy(new.input),
            created_by=new.created_by,
            created_at=new.created_at or datetime.now(UTC),
            started_at=state.started_at if state is not None else None,
            deadline_at=new.deadline_at,
            parent_run_id=new.parent_run_id,
            revision=0,
        )
        stored = StoredRun(
            row,
            idempotency_key=key,
            parent_step_id=new.parent_step_id,
            parent_index=new.parent_index,
        )
        self.tables.runs[new.id] = stored
        if state is not None:
            stored.output, stored.error = copy.deepcopy((state.output, state.error))
            stored.response, stored.finished_at = copy.deepcopy(state.response), state.finished_at
            self._changes(stored, state)
            if start is not None:
                self._claim(new.id, start)
        return stored

    def _changes(self, stored: StoredRun, state: RunState) -> None:
        """Copy ``state``'s changed step records and events into ``stored``, then clear
        them in ``state`` (what a written statement does)."""
        for step_id in sorted(state.changed):
            stored.steps[step_id] = copy.deepcopy(state.steps[step_id])
        stored.events += [(e.kind, e.step_id, copy.deepcopy(e.data)) for e in state.events]
        state.changed.clear()
        state.events.clear()

    def _write(
        self,
        run_id: uuid.UUID,
        state: RunState,
        *,
        finish: FinishedAttempt | None,
        start: NewAttempt | None,
        expected_revision: int | None,
        deadline_at: datetime | None = None,
    ) -> Written:
        """The one write of a transition (``backend.db.run_writes.write_state``)."""
        stored = self.tables.runs.get(run_id)
        if stored is None or (
            expected_revision is not None and stored.row.revision != expected_revision
        ):
            return Written(None, moved=True)
        if finish is not None:
            attempt = self._current(finish.id, finish.fencing_token)
            if attempt is None:
                return Written(None)
            attempt.status, attempt.finished_at = finish.status, finish.finished_at
            attempt.output, attempt.error = copy.deepcopy((finish.output, finish.error))
        if start is not None:
            self._claim(run_id, start)
        self._changes(stored, state)
        stored.output, stored.error = copy.deepcopy((state.output, state.error))
        stored.response, stored.finished_at = copy.deepcopy(state.response), state.finished_at
        stored.row = replace(
            stored.row,
            status=state.status.value,
            started_at=state.started_at,
            deadline_at=deadline_at or stored.row.deadline_at,
            revision=stored.row.revision + 1,
        )
        settings = None
        if state.status.terminal:
            workflow = self.tables.workflows.get(stored.row.workflow_id)
            settings = WorkflowSettings.from_raw(
                copy.deepcopy(workflow.settings) if workflow else None
            )
        return Written(stored.row.revision, settings=settings)

    def _state(
        self,
        stored: StoredRun,
        records: dict[str, StepRecord],
        children: dict[str, list[ChildRun]],
        summaries: dict[str, ChildSummary],
    ) -> RunState:
        row = stored.row
        state = RunState(
            run_id=str(row.id),
            workflow_id=str(row.workflow_id),
            version_number=row.version_number,
            status=RunStatus(row.status),
            input=copy.deepcopy(row.input),
            steps=records,
            output=copy.deepcopy(stored.output),
            error=copy.deepcopy(stored.error),
            response=copy.deepcopy(stored.response),
            started_at=row.started_at,
            finished_at=stored.finished_at,
            children=children,
        )
        state.child_summaries = summaries
        return state

    def _children(
        self, run_id: uuid.UUID, records: dict[str, StepRecord], outputs: OutputsWanted | None
    ) -> tuple[dict[str, list[ChildRun]], dict[str, ChildSummary]]:
        """Child runs read as ``backend.db.run_state.load_state`` reads them: per calling
        step the children that did not succeed and a summary of the others; every child
        with its output for the steps ``outputs`` wants (all without it)."""
        mine = sorted(
            (r for r in self.tables.runs.values() if r.row.parent_run_id == run_id),
            key=lambda r: r.parent_index or 0,
        )
        every: dict[str, list[ChildRun]] = {}
        for child in mine:
            step_id = str(child.parent_step_id)
            every.setdefault(step_id, []).append(
                ChildRun(
                    step_id,
                    child.parent_index or 0,
                    str(child.row.id),
                    child.row.status,
                    copy.deepcopy(child.output),
                    copy.deepcopy(child.error),
                )
            )
        short: dict[str, list[ChildRun]] = {}
        summaries: dict[str, ChildSummary] = {}
        for step_id, runs in every.items():
            short[step_id] = [
                replace(c, output=None) for c in runs if c.status != RunStatus.SUCCEEDED.value
            ]
            next_index = max(c.index for c in runs) + 1
            summaries[step_id] = ChildSummary.below(next_index, len(short[step_id]))
        wanted = set(summaries) if outputs is None else outputs(records, short, summaries)
        for step_id in wanted:
            short[step_id] = every.get(step_id, [])
            summaries.pop(step_id, None)
        return short, summaries


class MemoryRunTransaction:
    """One transaction of :class:`MemoryRunStore`
    (:class:`~backend.engine.ports.RunTransaction`)."""

    def __init__(self, store: MemoryRunStore) -> None:
        self.store = store

    @property
    def _tables(self) -> Tables:
        return self.store.tables

    async def lock_admission(self, workflow_id: uuid.UUID) -> None:
        """Nothing to do: the transaction holds the whole store."""

    async def peek(self, run_id: uuid.UUID) -> tuple[str, uuid.UUID] | None:
        stored = self._tables.runs.get(run_id)
        return None if stored is None else (stored.row.status, stored.row.workflow_id)

    async def lock(self, run_id: uuid.UUID) -> RunRow | None:
        stored = self._tables.runs.get(run_id)
        return None if stored is None else stored.row

    async def load(
        self,
        row: RunRow,
        *,
        children: bool = True,
        held: HeldSteps | None = None,
        outputs: OutputsWanted | None = None,
    ) -> RunState:
        stored = self._tables.runs[row.id]
        if held is not None and held.revision == stored.row.revision:
            records = held.records
        else:
            records = copy.deepcopy(stored.steps)
        by_step, summaries = (
            self.store._children(row.id, records, outputs) if children else ({}, {})
        )
        return self.store._state(stored, records, by_step, summaries)

    async def graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        return await self.store.graph(version_id)

    async def settings(self, workflow_id: uuid.UUID) -> WorkflowSettings:
        return await self.store.read_settings(workflow_id)

    async def insert_run(self, new: NewRun, state: RunState | None = None) -> bool:
        return self.store._insert(new, state, None) is not None

    async def insert_queued_runs(self, news: Sequence[NewRun]) -> list[bool]:
        return [self.store._insert(new, None, None) is not None for new in news]

    async def save(
        self,
        row: RunRow,
        state: RunState,
        *,
        finish: FinishedAttempt | None = None,
        start: NewAttempt | None = None,
        deadline_at: datetime | None = None,
    ) -> RunRow:
        stored = self._tables.runs[row.id]
        # nothing is written when nothing changed (``backend.db.run_state.save_state``)
        run_same = (
            state.status.value == stored.row.status
            and state.output == stored.output
            and state.error == stored.error
            and state.response == stored.response
            and state.started_at == stored.row.started_at
            and state.finished_at == stored.finished_at
            and (deadline_at is None or deadline_at == stored.row.deadline_at)
        )
        if run_same and not (state.changed or state.events or finish or start):
            return stored.row
        written = self.store._write(
            row.id,
            state,
            finish=finish,
            start=start,
            expected_revision=None,
            deadline_at=deadline_at,
        )
        if written.revision is None:
            raise StaleAttempt(f"attempt {finish.id if finish else '?'} is no longer current")
        return self._tables.runs[row.id].row

    async def close_attempt(self, finish: FinishedAttempt, status: str | None = None) -> bool:
        attempt = self.store._current(finish.id, finish.fencing_token)
        if attempt is None:
            return False
        attempt.status, attempt.finished_at = status or finish.status, finish.finished_at
        attempt.output, attempt.error = copy.deepcopy((finish.output, finish.error))
        return True

    async def cancel_running_attempts(self, run_id: uuid.UUID, now: datetime) -> None:
        for attempt in self._tables.attempts.values():
            if attempt.run_id == run_id and attempt.status == "running":
                attempt.status, attempt.finished_at = "cancelled", now

    async def active_count(self, workflow_id: uuid.UUID) -> int:
        runs = self._tables.runs.values()
        return sum(r.row.workflow_id == workflow_id and r.row.status in ACTIVE for r in runs)

    async def oldest_queued(self, workflow_id: uuid.UUID, limit: int) -> list[uuid.UUID]:
        queued = [
            r.row
            for r in self._tables.runs.values()
            if r.row.workflow_id == workflow_id and r.row.status == RunStatus.QUEUED.value
        ]
        queued.sort(key=lambda row: (row.created_at, row.id))
        return [row.id for row in queued[:limit]]

    async def resolve_version(
        self, workflow_id: str, number: int | None
    ) -> tuple[uuid.UUID, uuid.UUID, int] | None:
        try:
            workflow = self._tables.workflows.get(uuid.UUID(workflow_id))
        except ValueError:
            return None
        if workflow is None or workflow.archived:
            return None
        wanted = workflow.active_version if number is None else number
        if wanted is None or wanted not in workflow.versions:
            return None
        return workflow.id, workflow.versions[wanted], wanted

    async def workflow_name(self, workflow_id: uuid.UUID) -> str | None:
        workflow = self._tables.workflows.get(workflow_id)
        return None if workflow is None else workflow.name

    async def step_outcomes(self, run_id: uuid.UUID) -> dict[str, str]:
        stored = self._tables.runs.get(run_id)
        steps = stored.steps if stored is not None else {}
        return {step_id: rec.status.value for step_id, rec in steps.items()}

    async def copy_steps(
        self, source_run_id: uuid.UUID, target_run_id: uuid.UUID, step_ids: list[str]
    ) -> None:
        source, target = self._tables.runs[source_run_id], self._tables.runs.get(target_run_id)
        if target is None:
            return
        for step_id in step_ids:
            if step_id in source.steps:
                target.steps[step_id] = copy.deepcopy(source.steps[step_id])

    async def seed_step(self, run_id: uuid.UUID, step_id: str, data: dict[str, Any]) -> None:
        stored = self._tables.runs.get(run_id)
        if stored is not None:
            stored.steps[step_id] = StepRecord(step_id=step_id, data=copy.deepcopy(data))

    async def add_event(self, run_id: uuid.UUID, kind: str, data: dict[str, Any]) -> None:
        stored = self._tables.runs.get(run_id)
        if stored is not None:
            stored.events.append((kind, None, copy.deepcopy(data)))

    async def add_audit(self, entry: AuditEntry) -> None:
        self._tables.audit.append(entry)

    async def publisher_refusal(self, run_id: uuid.UUID, workflow_id: str) -> str | None:
        """Every publisher may run every workflow (the memory store keeps no grants)."""
        return None


def as_port(store: MemoryRunStore) -> RunStore:
    """``store`` typed as the port (mypy checks the fake has every method of it)."""
    return store


def as_transaction(transaction: MemoryRunTransaction) -> RunTransaction:
    """``transaction`` typed as the port's transaction (checked by mypy likewise)."""
    return transaction
