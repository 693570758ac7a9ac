"""What the call nodes (Sub-workflow, For-each) share: the target settings, child run ids
and how a child's failure reads.

Both start *child runs*: full, durable runs of another workflow, linked to the parent by
``(parent run, parent step, item index)``. The parent step stays ``running`` without a
worker (the run is ``waiting``) until its children end; their results come back through
:attr:`backend.engine.model.RunState.children`.

Why a child run per item rather than iteration records inside the parent: each iteration
then has its own step records, attempts, retries, timers and run page, all durable in
PostgreSQL by the same code as any run; the parent's graph stays acyclic; and a
concurrency limit is simply the number of unfinished children.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec

from backend.engine.model import ChildRun

_CHILD_NAMESPACE = uuid.UUID("6f1f0c3e-5b7a-4a59-9d0e-2b8f3f7c9a11")

WorkflowId = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        title="Workflow",
        description="The workflow each call runs (one you may run).",
        extra_json_schema={"x-workflow-picker": True},
    ),
]
"""The config field naming the workflow a call runs (a workflow id)."""

PinnedVersion = Annotated[
    int | None,
    msgspec.Meta(
        title="Version",
        description="Pinned version number; empty runs the active version.",
        extra_json_schema={"type": ["integer", "null"]},
    ),
]
"""The config field pinning the version a call runs (``None``: the active version)."""


def child_run_id(run_id: str, step_id: str, index: int) -> str:
    """Deterministic id of the child run of ``(run, step, item index)`` (UUID 5)."""
    return str(uuid.uuid5(_CHILD_NAMESPACE, f"{run_id}:{step_id}:{index}"))


def child_failed(status: str) -> bool:
    """True for child run statuses that count as a failure of the item."""
    return status in ("failed", "cancelled", "timed_out")


def child_error(child: ChildRun) -> dict[str, Any]:
    """The step error for a failed ``child``: its message, kind ``child_failed``, the child
    run id and status, and the child's own error under ``child_error``."""
    error = dict(child.error or {})
    return {
        "message": error.get("message") or f"child run {child.status}",
        "kind": "child_failed",
        "child_run_id": child.run_id,
        "child_status": child.status,
        "child_error": error,
    }


def target(workflow_id: str, version: int | None, wait: bool) -> dict[str, Any]:
    """The start of a call's durable data: ``{"workflow_id", "version", "wait"}``, from
    the fields of its decoded config."""
    return {"workflow_id": workflow_id, "version": version, "wait": wait}
