"""Search test data: workflows (with a version) and runs written straight into PostgreSQL,
so each test states exactly the statuses, inputs, errors, steps and times it searches."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from backend.db.models import Run, StepRun, WorkflowVersion
from backend.runtime import Runtime
from backend.services.workflows import workflows

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


async def make_workflow(
    runtime: Runtime,
    name: str,
    *,
    owner: uuid.UUID | None = None,
    tags: list[str] | None = None,
    description: str = "",
    node_types: list[str] | None = None,
) -> uuid.UUID:
    """A workflow with version 1 published; returns its id."""
    async with runtime.sessionmaker() as s, s.begin():
        wf = await workflows.create_workflow(s, name, owner, description, tags)
        nodes = [{"id": f"n{i}", "type": t} for i, t in enumerate(node_types or [])]
        wf.draft = {**wf.draft, "nodes": nodes}
        s.add(
            WorkflowVersion(
                workflow_id=wf.id, number=1, diagram={}, graph={}, content_hash=uuid.uuid4().hex
            )
        )
        wf.active_version = 1
        return wf.id


async def make_run(
    runtime: Runtime,
    workflow_id: uuid.UUID,
    *,
    status: str = "succeeded",
    trigger: str = "webhook",
    input: Any = None,
    output: Any = None,
    error: Any = None,
    minutes: float = 0,
    duration_s: float = 1.0,
    steps: tuple[str, ...] = (),
    version: int = 1,
) -> uuid.UUID:
    """A run created ``minutes`` after :data:`T0`; returns its id."""
    created = T0 + timedelta(minutes=minutes)
    async with runtime.sessionmaker() as s, s.begin():
        from sqlalchemy import select

        vid = (
            await s.execute(
                select(WorkflowVersion.id).where(WorkflowVersion.workflow_id == workflow_id)
            )
        ).scalar_one()
        run = Run(
            workflow_id=workflow_id,
            version_id=vid,
            version_number=version,
            status=status,
            trigger=trigger,
            input=input,
            output=output,
            error=error,
            created_at=created,
            started_at=created,
            finished_at=created + timedelta(seconds=duration_s),
        )
        s.add(run)
        await s.flush()
        for sid in steps:
            s.add(StepRun(run_id=run.id, step_id=sid, status=status, ports=[]))
        return run.id
