"""Test runs: run the draft without publishing it ("Test workflow", "Test step").

A test run is a real durable run (same engine, workers, retries, events, audit) of an
unlisted snapshot of the draft: a ``workflow_versions`` row of kind ``draft`` (number 0,
never active, never listed; reused while the draft and its pins are unchanged, found by
content hash). The snapshot graph is the draft's compiled graph with pinned data
substituted (backend/services/workflows/pinned_graph.py). Run detail marks such runs ``test``.

Nothing is simulated: every action step that is not replaced by data really executes
(HTTP requests are sent, Slack messages posted, emails delivered); the plan's
``executes`` lists those steps so the designer can say so before and after.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import msgspec
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import distinct_on, insert
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Run, StepRun, WorkflowVersion
from backend.db.payloads import resolve_values
from backend.db.versions import DRAFT, DRAFT_NUMBER
from backend.services.errors import InvalidInput
from backend.services.runs import runs
from backend.services.runs.execution import Execution
from backend.services.triggers.webhook_versions import (
    WEBHOOK_TRIGGER,
    draft_config,
    invalid_body_mode,
)
from backend.services.workflows import pins
from backend.services.workflows.pinned_graph import UnknownStep, ancestors, plan_test
from backend.services.workflows.workflows import PublishRejected, compile_for, get_workflow
from backend.triggers.body_schema import BodyRefused, verdict
from designer_schema.catalog import Catalog
from designer_schema.diagram import Diagram
from designer_schema.graph import WorkflowGraph

TEST_TRIGGER = "test"
"""``runs.trigger`` of a test run."""

INPUT_GIVEN = "given"
INPUT_PINNED = "pinned"
INPUT_LAST_RUN = "last_run"
INPUT_EMPTY = "empty"


@dataclass
class TestRunStarted:
    """A started test run: ``run_id``, ``status``; ``step_id`` of a *Test step*;
    ``executes`` (action steps that really run), ``substituted`` (step id -> ``pinned`` /
    ``last_run``) and ``input_source`` (``given``, ``pinned``, ``last_run`` or ``empty``)."""

    run_id: uuid.UUID
    status: str
    step_id: str | None
    executes: list[str]
    substituted: dict[str, str]
    input_source: str


async def last_run_data(
    session: AsyncSession, workflow_id: uuid.UUID, step_ids: set[str]
) -> tuple[dict[str, Any], Any, bool]:
    """``(outputs, input, found)`` from the workflow's runs, newest first: each step's
    output in the newest run where it succeeded, and the newest run's input (``found``
    False when the workflow has no run). Large values are read in full."""
    outputs: dict[str, Any] = {}
    if step_ids:
        rows = await session.execute(
            select(StepRun.step_id, StepRun.output)
            .join(Run, Run.id == StepRun.run_id)
            .where(
                Run.workflow_id == workflow_id,
                StepRun.step_id.in_(step_ids),
                StepRun.status == "succeeded",
            )
            .order_by(StepRun.step_id, Run.created_at.desc())
            .ext(distinct_on(StepRun.step_id))
        )
        found = [(str(sid), output) for sid, output in rows]
        resolved = await resolve_values(session, [output for _, output in found])
        outputs = {sid: value for (sid, _), value in zip(found, resolved, strict=True)}
    newest = (
        await session.execute(
            select(Run.input)
            .where(Run.workflow_id == workflow_id, Run.parent_run_id.is_(None))
            .order_by(Run.created_at.desc())
            .limit(1)
        )
    ).one_or_none()
    if newest is None:
        return outputs, None, False
    (run_input,) = await resolve_values(session, [newest[0]])
    return outputs, run_input, True


async def snapshot_version(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    diagram: dict[str, Any],
    graph: WorkflowGraph,
    user_id: uuid.UUID | None,
) -> WorkflowVersion:
    """The draft snapshot version holding ``graph`` (created unless one with its content
    hash exists; committed, so workers can load it)."""
    await session.execute(
        insert(WorkflowVersion)
        .values(
            id=uuid.uuid4(),
            workflow_id=workflow_id,
            number=DRAFT_NUMBER,
            kind=DRAFT,
            diagram=diagram,
            graph=msgspec.to_builtins(graph),
            content_hash=graph.content_hash,
            created_by=user_id,
        )
        .on_conflict_do_nothing(index_elements=["workflow_id", "kind", "content_hash"])
    )
    version = (
        await session.execute(
            select(WorkflowVersion).where(
                WorkflowVersion.workflow_id == workflow_id,
                WorkflowVersion.kind == DRAFT,
                WorkflowVersion.content_hash == graph.content_hash,
            )
        )
    ).scalar_one()
    await session.commit()
    return version


def checked_body(graph: WorkflowGraph, run_input: Any) -> Any:
    """``run_input`` after the body schema of ``graph``'s webhook trigger (version 4;
    docs/webhooks.md, "Body schema"), as the webhook would check a delivery: unchanged
    when it conforms, carrying the problems (``body_errors``: the test run fails at its
    trigger as ``invalid_body``) in mode ``mark_invalid``; raises
    :class:`~backend.services.errors.InvalidInput` naming the first field
    (``input.body.qty``) in mode ``reject``."""
    trigger = next((s for s in graph.steps if s.id == graph.trigger), None)
    if trigger is None or not isinstance(run_input, dict):
        return run_input
    if trigger is None or trigger.type != WEBHOOK_TRIGGER:
        return run_input
    step = {"type": trigger.type, "type_version": trigger.type_version}
    config, _problem = draft_config(trigger.config)  # the test URL refuses a bad config
    mode = invalid_body_mode(step, config)
    root = "data" if config.cloudevents else "body"
    try:
        return verdict(mode, config.body_schema, run_input, root=root)
    except BodyRefused as refused:
        where = f"input.{refused.problems[0]['field']}"
        raise InvalidInput(f"{refused} (the webhook refuses it with 422)", where) from None


async def start_test_run(
    session: AsyncSession,
    execution: Execution,
    catalog: Catalog,
    workflow_id: uuid.UUID,
    *,
    user_id: uuid.UUID,
    step_id: str | None = None,
    input: Any = None,
    input_given: bool = False,
) -> TestRunStarted:
    """Start a test run of the saved draft of ``workflow_id`` (the whole workflow, or with
    ``step_id`` just that step and what it depends on).

    The run input is ``input`` when ``input_given``, else the trigger's pinned data, else
    the last run's input, else ``{}``. Audited as ``run.start`` with trigger ``test``.
    Raises :class:`~backend.services.workflows.workflows.WorkflowNotFound`,
    :class:`~backend.services.workflows.workflows.PublishRejected` (the draft has compile errors:
    422 with diagnostics) or :class:`~backend.services.errors.InvalidInput` (an
    unknown ``step_id``, or the trigger itself named: nothing to test).
    """
    wf = await get_workflow(session, workflow_id)
    graph, diagnostics = compile_for(msgspec.convert(wf.draft, Diagram), catalog)
    errors = [d for d in diagnostics if d.severity == "error"]
    if graph is None or errors:
        raise PublishRejected(errors or diagnostics)
    if step_id is not None and step_id == graph.trigger:
        raise InvalidInput("the trigger is not executed: pin its data instead", "step_id")
    pinned = pins.pinned_values(wf)
    known = step_id is not None and step_id in {s.id for s in graph.steps}
    wanted = ancestors(graph, step_id) if known and step_id is not None else set()
    last_outputs, last_input, has_last = await last_run_data(session, wf.id, wanted)
    try:
        plan = plan_test(graph, pinned, target=step_id, last_outputs=last_outputs)
    except UnknownStep as exc:
        raise InvalidInput(str(exc), "step_id") from exc
    if input_given:
        run_input, source = input, INPUT_GIVEN
    elif graph.trigger in pinned:
        run_input, source = pinned[graph.trigger], INPUT_PINNED
    elif has_last:
        run_input, source = last_input, INPUT_LAST_RUN
    else:
        run_input, source = {}, INPUT_EMPTY
    run_input = checked_body(plan.graph, run_input)
    version = await snapshot_version(session, wf.id, wf.draft, plan.graph, user_id)
    started = await runs.start(execution, version, run_input, trigger=TEST_TRIGGER, user_id=user_id)
    return TestRunStarted(
        started.run_id, started.status, step_id, plan.executes, plan.substituted, source
    )
