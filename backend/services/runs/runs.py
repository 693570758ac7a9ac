"""Run queries (lists, the run detail with steps and attempts) and the audited run
requests of users and API tokens (start, pause, resume, cancel, re-run, replay)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Attempt, Run, StepRun, Workflow, WorkflowVersion
from backend.db.versions import DRAFT
from backend.engine.ports import AuditEntry
from backend.engine.states import RunStatus
from backend.services import audit, paging
from backend.services.errors import InvalidInput
from backend.services.runs.execution import (
    AuditHook,
    Execution,
    StartedRun,
    StepNotReplayable,
    error_run_id,
)
from backend.services.runs.run_children import ChildLink, first_pages
from backend.services.runs.run_values import with_previews
from designer_schema.graph import WorkflowGraph


class AttemptView(msgspec.Struct):
    """One attempt of a step; durations in milliseconds.

    ``wait_ms``: how long the step waited between the previous attempt's end and this
    one's start (the retry backoff; ``None`` for the first attempt).
    """

    number: int
    status: str
    worker: str
    idempotency_key: str
    error: Any
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    wait_ms: int | None = None


class StepView(msgspec.Struct):
    """A step of a run as shown in the API and the run page."""

    step_id: str
    label: str
    type: str
    status: str
    ports: list[str]
    input: Any
    output: Any
    error: Any
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    attempts: list[AttemptView]


class RunSummary(msgspec.Struct):
    """A row of the run list."""

    id: str
    workflow_id: str
    workflow_name: str
    status: str
    version: int
    trigger: str
    created_at: datetime
    finished_at: datetime | None
    duration_ms: int | None


class RunDetail(msgspec.Struct):
    """A run with every step of its graph (steps not reached yet are ``pending``; in an
    ended run, where they never will be, ``cancelled``).

    Large values (over the inline limit) appear as bounded previews with a
    ``download_url`` (backend/services/runs/run_values.py).
    ``deadline_at``: when the run times out (workflow setting ``run_timeout_seconds``);
    ``rerun_of``/``reruns``: the run this one repeats / runs repeating this one (oldest
    first); ``error_run_id``: the error workflow's run started because this run failed.
    ``children``: the first :data:`~backend.services.runs.run_children.CHILD_PAGE` child runs
    of each calling step, ``children_count`` how many each has (the rest: ``GET
    /api/runs/{id}/children``). ``test``: a test run of the draft (its version is an
    unlisted draft snapshot, backend/services/workflows/draft_runs.py). Steps an ended run never
    reached are ``not_run``.
    """

    id: str
    workflow_id: str
    workflow_name: str
    status: str
    version: int
    trigger: str
    input: Any
    output: Any
    error: Any
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    steps: list[StepView]
    parent_run_id: str | None = None
    children: list[ChildLink] = msgspec.field(default_factory=list)
    children_count: dict[str, int] = msgspec.field(default_factory=dict)
    deadline_at: datetime | None = None
    rerun_of: str | None = None
    reruns: list[str] = msgspec.field(default_factory=list)
    error_run_id: str | None = None
    test: bool = False


NOT_RUN = "not_run"
"""Status shown for a step an ended run never reached (it has no step record)."""


def _ms(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return int((end - start).total_seconds() * 1000)


async def list_runs(
    session: AsyncSession,
    *,
    workflow_id: uuid.UUID | None = None,
    status: str | None = None,
    limit: int = 100,
    visible: ColumnElement[bool] | None = None,
) -> list[RunSummary]:
    """Newest runs first, optionally filtered by workflow and status, and to the runs of
    workflows matching ``visible`` (:func:`backend.services.identity.access.workflow_filter`)."""
    page = await page_runs(
        session, workflow_id=workflow_id, status=status, limit=limit, visible=visible
    )
    return page.items


async def page_runs(
    session: AsyncSession,
    *,
    workflow_id: uuid.UUID | None = None,
    status: str | None = None,
    cursor: str | None = None,
    limit: int = 100,
    visible: ColumnElement[bool] | None = None,
) -> paging.Slice[RunSummary]:
    """One page of the runs :func:`list_runs` lists, newest first by ``(created_at,
    id)``, after ``cursor`` (:mod:`backend.services.paging`; raises ``BadCursor``)."""
    stmt = select(Run, Workflow.name).join(Workflow, Workflow.id == Run.workflow_id)
    if visible is not None:
        stmt = stmt.where(visible)
    if workflow_id is not None:
        stmt = stmt.where(Run.workflow_id == workflow_id)
    if status:
        stmt = stmt.where(Run.status == status)
    page = await paging.page_query(
        session,
        stmt,
        (Run.created_at, Run.id),
        tuple[datetime, uuid.UUID],
        lambda row: (row[0].created_at, row[0].id),
        collection="runs",
        cursor=cursor,
        limit=limit,
    )
    return paging.Slice(
        [RunSummary(**_run_fields(run, name)) for run, name in page.items], page.next_cursor
    )


def _run_fields(run: Run, workflow_name: str) -> dict[str, Any]:
    """Fields shared by :class:`RunSummary` and :class:`RunDetail`."""
    return {
        "id": str(run.id),
        "workflow_id": str(run.workflow_id),
        "workflow_name": workflow_name,
        "status": run.status,
        "version": run.version_number,
        "trigger": run.trigger,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "duration_ms": _ms(run.started_at, run.finished_at),
    }


async def get_run_detail(
    session: AsyncSession, run_id: uuid.UUID, base_url: str
) -> tuple[RunDetail, dict[str, Any]] | None:
    """The run with its steps and attempts, and the version's diagram; None if absent.
    ``base_url`` (``RAILYARD_BASE_URL``) makes large values' ``download_url`` absolute."""
    row = (
        await session.execute(
            select(Run, Workflow.name, WorkflowVersion)
            .join(Workflow, Workflow.id == Run.workflow_id)
            .join(WorkflowVersion, WorkflowVersion.id == Run.version_id)
            .where(Run.id == run_id)
        )
    ).one_or_none()
    if row is None:
        return None
    run, name, version = row
    graph = msgspec.convert(version.graph, WorkflowGraph)
    step_rows = {
        s.step_id: s
        for s in (await session.execute(select(StepRun).where(StepRun.run_id == run_id))).scalars()
    }
    attempts: dict[str, list[AttemptView]] = {}
    for a in (
        await session.execute(
            select(Attempt).where(Attempt.run_id == run_id).order_by(Attempt.number)
        )
    ).scalars():
        previous = attempts.get(a.step_id, [])
        attempts.setdefault(a.step_id, []).append(
            AttemptView(
                number=a.number,
                status=a.status,
                worker=a.worker,
                idempotency_key=a.idempotency_key,
                error=a.error,
                started_at=a.started_at,
                finished_at=a.finished_at,
                duration_ms=_ms(a.started_at, a.finished_at),
                wait_ms=_ms(previous[-1].finished_at, a.started_at) if previous else None,
            )
        )
    # a step never reached in an ended run will never run: "not_run", not pending
    unreached = NOT_RUN if RunStatus(run.status).terminal else "pending"
    steps = []
    for spec in graph.steps:
        s = step_rows.get(spec.id)
        steps.append(
            StepView(
                step_id=spec.id,
                label=spec.label or spec.id,
                type=spec.type,
                status=s.status if s else unreached,
                ports=list(s.ports or []) if s else [],
                input=s.input if s else None,
                output=s.output if s else None,
                error=s.error if s else None,
                started_at=s.started_at if s else None,
                finished_at=s.finished_at if s else None,
                duration_ms=_ms(s.started_at, s.finished_at) if s else None,
                attempts=attempts.get(spec.id, []),
            )
        )
    children, children_count = await first_pages(session, run_id)
    detail = RunDetail(
        **_run_fields(run, name),
        input=run.input,
        output=run.output,
        error=run.error,
        started_at=run.started_at,
        steps=steps,
        parent_run_id=str(run.parent_run_id) if run.parent_run_id else None,
        children=children,
        children_count=children_count,
        deadline_at=run.deadline_at,
        rerun_of=str(run.rerun_of) if run.rerun_of else None,
        reruns=[
            str(rid)
            for rid in (
                await session.execute(
                    select(Run.id).where(Run.rerun_of == run_id).order_by(Run.created_at)
                )
            ).scalars()
        ],
        error_run_id=await _error_run(session, run),
        test=version.kind == DRAFT,
    )
    await _preview_large_values(session, detail, base_url)
    return detail, version.diagram


async def _preview_large_values(session: AsyncSession, detail: RunDetail, base_url: str) -> None:
    """Replace the references to large values in ``detail`` by bounded previews with an
    absolute download link on ``base_url`` (backend/services/runs/run_values.py)."""
    values = [detail.input, detail.output, detail.error]
    for step in detail.steps:
        values += [step.input, step.output, step.error]
    shown = iter(await with_previews(session, uuid.UUID(detail.id), values, base_url))
    detail.input, detail.output, detail.error = next(shown), next(shown), next(shown)
    for step in detail.steps:
        step.input, step.output, step.error = next(shown), next(shown), next(shown)


async def _error_run(session: AsyncSession, run: Run) -> str | None:
    if run.status not in ("failed", "timed_out"):
        return None
    found = await session.get(Run, error_run_id(run.id))
    return str(found.id) if found is not None else None


# -- run requests of users and API tokens (audited) ------------------------------------
#
# The use cases behind the run API: each hands execution an audit hook, so the audit row
# (``run.start``, ``run.pause``, ``run.resume``, ``run.cancel``, ``run.rerun``; actor,
# address and request id from the request) commits in the transaction that makes the
# change, or not at all. Webhook starts are not audited per run (docs/security.md, "Audit
# log"); schedule starts are, by the scheduler (backend.services.triggers.schedules.record_started).


def _audit_hook(action: str, *, after: dict[str, Any] | None = None, **details: Any) -> AuditHook:
    def hook(run_id: uuid.UUID, workflow_id: uuid.UUID, version: int) -> AuditEntry:
        facts = {"workflow_id": str(workflow_id), "version": version}
        return audit.entry(action, "run", run_id, after=after, details={**facts, **details})

    return hook


async def start(
    execution: Execution,
    version: WorkflowVersion,
    input: Any,
    *,
    trigger: str,
    user_id: uuid.UUID,
    idempotency_key: str | None = None,
) -> StartedRun:
    """Start a run of ``version`` for a user (``trigger`` ``manual``) or an API token
    (``api``), audited as ``run.start``. ``idempotency_key`` is the caller's
    ``Idempotency-Key``, scoped to the workflow (:func:`start_key`). See
    :meth:`Execution.start_run` for the rest."""
    return await execution.start_run(
        version,
        input,
        trigger=trigger,
        idempotency_key=start_key(version.workflow_id, idempotency_key),
        user_id=user_id,
        audit=_audit_hook("run.start", trigger=trigger),
    )


def start_key(workflow_id: uuid.UUID, key: str | None) -> str | None:
    """The run key stored for a start's ``Idempotency-Key`` ``key`` on ``workflow_id``:
    ``api:<workflow id>:<SHA-256 of key, hex>`` (105 characters whatever the key's
    length). A key names one start of one workflow: the same key sent to another workflow
    starts that workflow's run, and no key a caller sends can take the place of the keys
    the engine derives for webhook deliveries, schedules and trigger events (``webhook:``,
    ``schedule:``, ...). ``None`` without a key."""
    if key is None:
        return None
    return f"api:{workflow_id}:{hashlib.sha256(key.encode()).hexdigest()}"


async def pause(execution: Execution, run_id: uuid.UUID) -> None:
    """Pause a run, audited as ``run.pause``; raises as :meth:`Execution.pause_run`."""
    await execution.pause_run(run_id, audit=_audit_hook("run.pause", after={"status": "paused"}))


async def resume(execution: Execution, run_id: uuid.UUID) -> None:
    """Resume a paused run, audited as ``run.resume``; raises as :meth:`Execution.resume_run`."""
    await execution.resume_run(run_id, audit=_audit_hook("run.resume", after={"status": "running"}))


async def cancel(
    execution: Execution, run_id: uuid.UUID, reason: str = "cancelled by user"
) -> bool:
    """Cancel a run, audited as ``run.cancel`` (nothing is recorded for a run that had
    already ended: returns False then)."""
    return await execution.cancel_run(
        run_id,
        reason,
        audit=_audit_hook("run.cancel", after={"status": "cancelled"}, reason=reason),
    )


def _repeat_audit(
    action: str, original: uuid.UUID, *, after: Any = None, **details: Any
) -> AuditHook:
    """The audit hook of a run repeating ``original`` (re-run, replay): ``action`` on the
    original run, with the new run's id, workflow and version added to ``details``."""

    def hook(new_run_id: uuid.UUID, workflow_id: uuid.UUID, version: int) -> AuditEntry:
        return audit.entry(
            action,
            "run",
            original,
            after=after,
            details={
                **details,
                "new_run_id": str(new_run_id),
                "workflow_id": str(workflow_id),
                "version": version,
            },
        )

    return hook


async def rerun(
    execution: Execution, run_id: uuid.UUID, *, start_from: str, user_id: uuid.UUID
) -> StartedRun:
    """Re-run ended run ``run_id``, audited as ``run.rerun`` on the original run with the
    new run's id in the details; raises as :meth:`Execution.rerun`."""
    hook = _repeat_audit("run.rerun", run_id, **{"from": start_from})
    return await execution.rerun(run_id, start_from=start_from, user_id=user_id, audit=hook)


async def replay(
    execution: Execution,
    run_id: uuid.UUID,
    *,
    step_id: str,
    input: Any,
    user_id: uuid.UUID,
) -> StartedRun:
    """Replay ended run ``run_id`` from ``step_id`` with that step's input replaced by
    ``input``, audited as ``run.replay`` on the original run (new run id, step, and the
    edited input in the details); raises as :meth:`Execution.replay`, a step that cannot be
    replayed from as :class:`~backend.services.errors.InvalidInput` (``step_id``)."""
    hook = _repeat_audit("run.replay", run_id, after={"input": input}, step_id=step_id)
    try:
        return await execution.replay(
            run_id, step_id=step_id, input=input, user_id=user_id, audit=hook
        )
    except StepNotReplayable as exc:
        raise InvalidInput(str(exc), "step_id") from exc
