"""Ports: what the engine needs from the outside world, as Protocols.

Adapters live outside the core: ``backend.transport.dispatch`` (arq) implements
:class:`Dispatcher` and :class:`EventSink`, ``backend.services.connectors.catalog`` implements
:class:`ConnectorRegistry`, ``backend.db.run_store`` implements :class:`RunStore`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import msgspec

from backend.engine.model import ChildRun, ChildSummary, RunState, StepRecord
from designer_schema.graph import WorkflowGraph


class Dispatcher(Protocol):
    """Transport of work to workers. Losing a job is allowed: the sweeper re-dispatches.

    ``notify`` is the :class:`EventSink` of the same transport."""

    async def dispatch_step(self, run_id: str, step_id: str, *, delay: float | None = None) -> None:
        """Ask a worker to execute ready step ``step_id``, after ``delay`` seconds if given."""
        ...

    async def dispatch_advance(self, run_id: str) -> None:
        """Ask a worker to advance run ``run_id``."""
        ...

    async def notify(self, run_id: str, notice: bytes = b"changed") -> None:
        """Tell listeners (live pages, waiting webhooks) that run ``run_id`` changed;
        ``notice`` is what the change notice says (see :class:`EventSink`)."""
        ...

    async def announce_cancel(self, run_id: str) -> None:
        """Tell every worker that run ``run_id`` ended (cancelled, timed out): attempts of
        it still running must stop now. Best effort; leases are the backstop."""
        ...


class Clock(Protocol):
    """Source of the current time (tests drive a fake one)."""

    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""
        ...


class SystemClock:
    """The real UTC clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ActionRunner(Protocol):
    """One executable action node type."""

    def run(self, config: dict[str, Any], input: Any, context: Any) -> Awaitable[Any]:
        """Run once with resolved ``config`` and ``input``; raises the SDK's errors."""
        ...


class ConnectorRegistry(Protocol):
    """Lookup of executable action node types by node type name and version."""

    def action(self, node_type: str, version: int = 1) -> ActionRunner | None:
        """The runner of ``node_type`` at ``version`` (the version the step's graph pins),
        or ``None`` when no installed connector provides it."""
        ...


HeartbeatFn = Callable[[Any], Awaitable[None]]


class EventSink(Protocol):
    """Announces committed run changes to listeners (live run pages, waiting webhooks).

    Listeners subscribe first, then read PostgreSQL, so a lost notice only delays a page
    until its next read. ``notice`` is opaque here: the bytes the publisher chose (the
    run's status, and its answer when small: backend/services/runs/channels.py), or
    ``b"changed"`` for "read the run again".
    """

    async def notify(self, run_id: str, notice: bytes = b"changed") -> None:
        """Tell listeners that run ``run_id`` changed, saying ``notice``."""
        ...


class WorkflowSettings(msgspec.Struct, frozen=True):
    """A workflow's run-control settings, decided here once and handed to the store as
    plain parameters (the store never reads ``workflows.settings`` to apply a rule).

    ``max_concurrent_runs``: active runs (running, waiting, paused) allowed at once,
    ``None`` for no limit; ``run_timeout_seconds``: seconds from a run's start to its due
    time (``None``: none); ``error_workflow_id``: the workflow started when a run fails
    or times out. ``raw`` is the stored JSON object the values were read from (the store
    checks it is still current when it writes without a lock).
    """

    max_concurrent_runs: int | None = None
    run_timeout_seconds: float | None = None
    error_workflow_id: str | None = None
    raw: dict[str, Any] = msgspec.field(default_factory=dict)

    @classmethod
    def from_raw(cls, raw: dict[str, Any] | None) -> WorkflowSettings:
        """Read the stored JSON object (values validated when they were saved; anything
        unusable counts as unset)."""
        raw = dict(raw or {})
        limit = raw.get("max_concurrent_runs")
        timeout = raw.get("run_timeout_seconds")
        error_workflow = raw.get("error_workflow_id")
        return cls(
            max_concurrent_runs=int(limit)
            if isinstance(limit, int | float) and limit > 0
            else None,
            run_timeout_seconds=float(timeout)
            if isinstance(timeout, int | float) and timeout > 0
            else None,
            error_workflow_id=str(error_workflow) if error_workflow else None,
            raw=raw,
        )

    def deadline(self, started_at: datetime) -> datetime | None:
        """The run timeout's due time of a run started at ``started_at`` (or ``None``)."""
        if self.run_timeout_seconds is None:
            return None
        return started_at + timedelta(seconds=self.run_timeout_seconds)


@dataclass(frozen=True)
class RunRow:
    """What a transition needs of a run besides its :class:`~backend.engine.model.RunState`
    (identity, lineage and timing columns). ``revision`` counts the run's writes."""

    id: uuid.UUID
    workflow_id: uuid.UUID
    version_id: uuid.UUID
    version_number: int
    status: str
    trigger: str
    input: Any
    created_by: uuid.UUID | None
    created_at: datetime
    started_at: datetime | None
    deadline_at: datetime | None
    parent_run_id: uuid.UUID | None
    revision: int


@dataclass
class NewRun:
    """A run to insert: the columns that are not in its :class:`RunState`.

    ``status`` is ``queued`` unless the insert carries a started state. ``deadline_at`` is
    decided by :meth:`WorkflowSettings.deadline`. A child run names its parent step and
    item index; an error-workflow or child run has a deterministic ``id``, so inserting it
    twice is a no-op. ``by_reference`` are parts of ``input`` (by identity) that many runs
    share, such as a parent step's input passed to each child: stored once and referenced
    whatever their size (backend/db/payloads.py).
    """

    id: uuid.UUID
    workflow_id: uuid.UUID
    version_id: uuid.UUID
    version_number: int
    trigger: str
    input: Any
    created_at: datetime | None = None
    created_by: uuid.UUID | None = None
    idempotency_key: str | None = None
    rerun_of: uuid.UUID | None = None
    parent_run_id: uuid.UUID | None = None
    parent_step_id: str | None = None
    parent_index: int | None = None
    deadline_at: datetime | None = None
    by_reference: tuple[Any, ...] = ()


@dataclass
class FinishedAttempt:
    """The outcome of an attempt, closed by the store if its fencing token still holds.
    ``status`` is ``succeeded`` or ``failed``; ``output``/``error`` JSON-able."""

    id: int
    fencing_token: str
    status: str
    output: Any
    error: Any
    finished_at: datetime


@dataclass
class NewAttempt:
    """An attempt claimed in a transition; ``id`` is set once it is written."""

    step_id: str
    number: int
    fencing_token: str
    idempotency_key: str
    worker: str
    input: Any
    config: Any
    lease_expires_at: datetime
    started_at: datetime
    id: int | None = None


@dataclass
class Written:
    """What a write did: ``revision`` is the run's new revision, ``None`` when nothing was
    written because the run was not at the expected revision (``moved``) or the finished
    attempt's fencing token no longer held (not ``moved``). ``settings``: the run's
    workflow settings, read by the same statement when the write ended the run (so
    what the end implies needs no second round trip), else ``None``."""

    revision: int | None
    moved: bool = False
    settings: WorkflowSettings | None = None


class StaleAttempt(LookupError):
    """The attempt being completed is no longer the step's current one (its lease was
    taken over, or the run was cancelled or timed out): nothing was written and the
    outcome must be discarded."""


@dataclass(frozen=True)
class AuditEntry:
    """An audit row committed with a run's change (the request that made it: start,
    pause, resume, cancel, re-run). ``action`` is ``<object>.<verb>``; who and from where
    (``actor_*``, ``address``, ``request_id``) are read from the request when the entry is
    built (backend/services/audit.py, :func:`~backend.services.audit.entry`)."""

    action: str
    object_type: str
    object_id: str
    actor_user_id: uuid.UUID | None = None
    actor_label: str | None = None
    address: str | None = None
    request_id: str | None = None
    before: Any = None
    after: Any = None
    details: dict[str, Any] = field(default_factory=dict)


AuditHook = Callable[[uuid.UUID, uuid.UUID, int], AuditEntry]
"""``hook(run id, workflow id, version number) -> AuditEntry``: the audit row of a run
request, built by the services layer from the run the change concerns (no I/O) and
added by the writer in the transaction that makes the change
(:meth:`RunTransaction.add_audit`)."""


class DuplicateRun(Exception):
    """A run with that idempotency key exists: nothing was inserted."""


OutputsWanted = Callable[
    [Mapping[str, StepRecord], Mapping[str, list[ChildRun]], Mapping[str, ChildSummary]],
    set[str],
]
"""Given a run's step records, its children that did not succeed and the count of the
others per calling step, the calling steps whose every child (with its output) the
engine's next move reads (:func:`backend.engine.flow_steps.outputs_wanted`)."""


class RunTransaction(Protocol):
    """One database transaction of a run transition (see :class:`RunStore`)."""

    async def lock_admission(self, workflow_id: uuid.UUID) -> None:
        """Serialise admission of ``workflow_id``'s runs until the transaction ends.

        Taken before anything else is written, so every admission takes its locks in
        one order (admission lock, then run rows) and concurrent starts queue instead of
        deadlocking."""
        ...

    async def peek(self, run_id: uuid.UUID) -> tuple[str, uuid.UUID] | None:
        """``(status, workflow id)`` of a run without locking it (``None``: no such run)."""
        ...

    async def lock(self, run_id: uuid.UUID) -> RunRow | None:
        """Lock run ``run_id`` until the transaction ends (``None``: no such run)."""
        ...

    async def load(
        self,
        row: RunRow,
        *,
        children: bool = True,
        held: HeldSteps | None = None,
        outputs: OutputsWanted | None = None,
    ) -> RunState:
        """The state of run ``row`` (locked by :meth:`lock`).

        ``children=False`` skips loading child runs (the graph calls no workflow);
        ``held`` are step records the caller wrote itself, used when still current;
        ``outputs`` names the calling steps whose every child is read with its output
        (the other steps' succeeded children are only counted, ``child_summaries``;
        ``None``: every child of every step)."""
        ...

    async def graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        """The compiled graph of a workflow version (cached; raises ``LookupError``)."""
        ...

    async def settings(self, workflow_id: uuid.UUID) -> WorkflowSettings:
        """The run-control settings of a workflow (defaults when it is gone)."""
        ...

    async def insert_run(self, new: NewRun, state: RunState | None = None) -> bool:
        """Insert a run (``queued``, or started with ``state``'s step records and
        events); False when a run with ``new.id`` exists. Raises :class:`DuplicateRun`
        when the idempotency key is taken."""
        ...

    async def insert_queued_runs(self, news: Sequence[NewRun]) -> list[bool]:
        """Insert the queued runs ``news`` together (children: batched statements, not one
        per run); per run, in order, False when a run with its id exists. Raises
        :class:`DuplicateRun` when an idempotency key is taken."""
        ...

    async def save(
        self,
        row: RunRow,
        state: RunState,
        *,
        finish: FinishedAttempt | None = None,
        start: NewAttempt | None = None,
        deadline_at: datetime | None = None,
    ) -> RunRow:
        """Write ``state``'s changes (and ``finish``/``start``/``deadline_at``) under the
        run lock; returns the row as written. Raises :class:`StaleAttempt` when
        ``finish``'s token no longer holds (nothing written)."""
        ...

    async def close_attempt(self, finish: FinishedAttempt, status: str | None = None) -> bool:
        """Close a running attempt if its token holds (``status`` overrides
        ``finish.status``); False for a late or duplicate completion."""
        ...

    async def cancel_running_attempts(self, run_id: uuid.UUID, now: datetime) -> None:
        """Mark the run's running attempts ``cancelled``."""
        ...

    async def active_count(self, workflow_id: uuid.UUID) -> int:
        """How many runs of the workflow hold a concurrency slot."""
        ...

    async def oldest_queued(self, workflow_id: uuid.UUID, limit: int) -> list[uuid.UUID]:
        """Ids of the workflow's oldest queued runs (creation order), at most ``limit``."""
        ...

    async def resolve_version(
        self, workflow_id: str, number: int | None
    ) -> tuple[uuid.UUID, uuid.UUID, int] | None:
        """``(workflow id, version id, number)`` of a version (``None``: the active one),
        or ``None`` when there is no such workflow or version."""
        ...

    async def workflow_name(self, workflow_id: uuid.UUID) -> str | None:
        """The workflow's name (``None`` when it is gone)."""
        ...

    async def step_outcomes(self, run_id: uuid.UUID) -> dict[str, str]:
        """Step id -> status of every step record of a run."""
        ...

    async def copy_steps(
        self, source_run_id: uuid.UUID, target_run_id: uuid.UUID, step_ids: list[str]
    ) -> None:
        """Copy step records ``step_ids`` of one run into another."""
        ...

    async def seed_step(self, run_id: uuid.UUID, step_id: str, data: dict[str, Any]) -> None:
        """Insert a ``pending`` step record of ``run_id`` carrying ``data`` (a replay's
        edited input, read by the engine when the step becomes ready)."""
        ...

    async def add_event(self, run_id: uuid.UUID, kind: str, data: dict[str, Any]) -> None:
        """Append an event to a run's log (outside the engine's own batch)."""
        ...

    async def add_audit(self, entry: AuditEntry) -> None:
        """Add audit row ``entry`` in this transaction (it commits with the change)."""
        ...

    async def publisher_refusal(self, run_id: uuid.UUID, workflow_id: str) -> str | None:
        """Why the publisher of run ``run_id``'s version may not run workflow
        ``workflow_id`` (a Sub-workflow or For-each call), read in this transaction;
        ``None`` when it may."""
        ...


@dataclass
class HeldSteps:
    """Step records of a run as of ``revision`` (the run's revision after the write that
    produced them). Only the process that made that write may hold them: any other write
    bumps the revision and so invalidates them. ``stored`` is that state's
    :attr:`RunState.stored` (the values among them read from large-value payloads), so a
    write of a held record puts the same references back."""

    revision: int
    records: dict[str, StepRecord]
    stored: dict[int, tuple[Any, str]] = field(default_factory=dict)


class RunStore(Protocol):
    """Persistence of runs for the execution use cases (implemented by
    ``backend.db.run_store.PgRunStore``).

    A locked transition opens :meth:`transaction`; the fast paths write ONE statement
    in autocommit (:meth:`insert_started`, :meth:`write_unlocked`)."""

    def transaction(self) -> AbstractAsyncContextManager[RunTransaction]:
        """A transaction that commits when the block ends without an exception."""
        ...

    async def graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        """The compiled graph of a version, without I/O when cached."""
        ...

    def cached_graph(self, version_id: uuid.UUID) -> WorkflowGraph | None:
        """The graph of a version when cached in this process (no I/O)."""
        ...

    async def insert_started(
        self,
        new: NewRun,
        state: RunState,
        settings: WorkflowSettings,
        *,
        start: NewAttempt | None = None,
    ) -> Written:
        """Insert a started run with ``state`` and ``start``, the attempt its start claimed
        (its ``id`` is set), in one statement, only if the workflow's stored settings are
        still ``settings.raw``. Returns the run's revision when written, else ``moved``
        with the workflow's current settings in ``Written.settings`` (nothing written; the
        caller decides again). Raises :class:`DuplicateRun` when the idempotency key is
        taken and ``LookupError`` when the workflow is gone."""
        ...

    async def write_unlocked(
        self,
        run_id: uuid.UUID,
        state: RunState,
        *,
        finish: FinishedAttempt | None,
        start: NewAttempt | None,
        expected_revision: int,
    ) -> Written:
        """Write a transition in one statement, only if the run is still at
        ``expected_revision`` (see :class:`Written`; when ``state`` ends the run the
        statement also returns the workflow's settings in ``Written.settings``)."""
        ...

    async def read_unlocked(self, run_id: uuid.UUID) -> tuple[RunRow, RunState] | None:
        """The run's row and state read WITHOUT the run lock and without child runs
        (only for graphs without call steps), for a change to be written with
        :meth:`write_unlocked` fenced by the row's revision. The row is read before the
        steps, so steps newer than the row only make that write refuse (``moved``).
        ``None`` when the run does not exist."""
        ...

    async def read_settings(self, workflow_id: uuid.UUID) -> WorkflowSettings:
        """A workflow's run-control settings read in autocommit, outside any transaction
        (defaults when none or it is gone)."""
        ...

    async def extend_lease(self, attempt_id: int, token: str, until: datetime) -> bool:
        """Heartbeat: push a running attempt's lease; False when it is no longer current."""
        ...

    async def run_by_idempotency_key(self, key: str) -> tuple[uuid.UUID, str]:
        """``(id, status)`` of the run that holds idempotency key ``key``."""
        ...

    async def rerun_source(
        self, run_id: uuid.UUID, *, latest: bool
    ) -> tuple[str, Any, VersionRow | None] | None:
        """``(status, input, version)`` of ended run ``run_id`` for a re-run: its own
        version, or with ``latest`` its workflow's active one (``None`` when there is
        none). ``None`` when the run does not exist."""
        ...


@dataclass(frozen=True)
class VersionRow:
    """A workflow version as a start needs it."""

    id: uuid.UUID
    workflow_id: uuid.UUID
    number: int
