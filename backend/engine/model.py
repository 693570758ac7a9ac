"""In-memory run state the pure engine works on.

The persistence layer loads a :class:`RunState` (with the run row locked), the engine
mutates it through :mod:`backend.engine.orchestrator`, and the store writes back the
records the engine marked as changed, together with the emitted events, in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from backend.engine.states import RunStatus, StepStatus, check_run_transition, check_step_transition


@dataclass
class StepRecord:
    """State of one step in one run.

    ``ports`` are the output ports the step took when it finished (``("true",)`` for an If
    whose condition held, ``("error",)`` for a failure routed to the error port; empty for a
    failure that fails the run). ``not_before`` delays a ready step (retry backoff, timers).
    ``attempts`` counts attempts started so far. ``data`` is the engine's durable scratch
    state of a waiting step (a for-each's evaluated items and settings, a sub-workflow
    call's target), persisted with the record.
    """

    step_id: str
    status: StepStatus = StepStatus.PENDING
    ports: tuple[str, ...] = ()
    input: Any = None
    output: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 0
    not_before: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    data: dict[str, Any] | None = None

    def move(self, new: StepStatus) -> None:
        """Change status, enforcing :data:`backend.engine.states.STEP_TRANSITIONS`."""
        check_step_transition(self.status, new)
        self.status = new


@dataclass
class EngineEvent:
    """A state change to append to the run's event log (transactional outbox)."""

    kind: str
    step_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChildRun:
    """A child run started by a Sub-workflow or For-each step of this run.

    ``index`` is the item index (0 for a single sub-workflow call); ``status`` a run status
    value; ``output``/``error`` the child's result once it ended.
    """

    step_id: str
    index: int
    run_id: str
    status: str = "queued"
    output: Any = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class ChildSummary:
    """What the store read of a calling step's children it did not list one by one:
    ``succeeded`` children left out of :attr:`RunState.children` (ended well, outputs not
    needed yet) and ``next_index``, one past the highest index of any child (children
    start in index order, so every lower index has its child).

    Stores count ``succeeded`` as the indexes below ``next_index`` they did not list
    (:meth:`below`), without reading the succeeded children. A child the store refused
    (the called workflow not found, archived or not granted) has no row (it is recorded
    with its step: ``flow_steps.REFUSED``), but the pass that refuses one for an item
    refuses every later item too (or fails the step), so no row is
    inserted after such a gap."""

    succeeded: int = 0
    next_index: int = 0

    @classmethod
    def below(cls, next_index: int, listed: int) -> ChildSummary:
        """The summary of a step whose children have the indexes ``0..next_index-1``,
        ``listed`` of them listed one by one (the others succeeded)."""
        return cls(max(next_index - listed, 0), next_index)


@dataclass
class ChildRequest:
    """A child run the engine asks the store to create (in the same transaction).

    ``run_id`` is deterministic (see :func:`backend.engine.nodes.children.child_run_id`), so
    creating it twice is a no-op. ``version`` is a pinned version number or ``None`` for the
    workflow's active version; ``wait`` is False for fire-and-forget calls.
    """

    step_id: str
    index: int
    run_id: str
    workflow_id: str
    version: int | None
    input: Any
    wait: bool = True


@dataclass
class RunState:
    """A run with all its step records; ``changed`` names step records to persist.

    ``response`` is what a Respond to Webhook step produced:
    ``{"status": int, "headers": {str: str}, "body": Any}``. ``children`` lists the child
    runs of each calling step (loaded by the store: while a step still waits for some, only
    the children that did not succeed, the others counted in ``child_summaries``);
    ``child_requests`` and
    ``child_cancels`` (child run ids) are what the engine asks the store to do in the same
    transaction. ``stored`` is the store's own: the values it read from large-value
    references, by identity (``id -> (value, sha256)``), so it writes them back as the
    same references (backend/db/payloads.py); the engine never reads it.
    """

    run_id: str
    workflow_id: str
    version_number: int
    status: RunStatus
    input: Any
    steps: dict[str, StepRecord]
    output: Any = None
    error: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    changed: set[str] = field(default_factory=set)
    run_changed: bool = False
    events: list[EngineEvent] = field(default_factory=list)
    children: dict[str, list[ChildRun]] = field(default_factory=dict)
    child_summaries: dict[str, ChildSummary] = field(default_factory=dict)
    child_requests: list[ChildRequest] = field(default_factory=list)
    stored: dict[int, tuple[Any, str]] = field(default_factory=dict, repr=False, compare=False)
    child_cancels: list[str] = field(default_factory=list)

    def step(self, step_id: str) -> StepRecord:
        """Return the record of ``step_id``, creating a pending one when absent."""
        record = self.steps.get(step_id)
        if record is None:
            record = StepRecord(step_id=step_id)
            self.steps[step_id] = record
        return record

    def touch(self, step_id: str) -> None:
        """Mark a step record as changed so the store writes it."""
        self.changed.add(step_id)

    def move(self, new: RunStatus) -> None:
        """Change the run status, enforcing :data:`backend.engine.states.RUN_TRANSITIONS`."""
        check_run_transition(self.status, new)
        if self.status != new:
            self.status = new
            self.run_changed = True

    def emit(self, kind: str, step_id: str | None = None, **data: Any) -> None:
        """Append an event (``run.started``, ``step.succeeded`` ...) to the outbox batch."""
        self.events.append(EngineEvent(kind=kind, step_id=step_id, data=data))
