"""Steps that run other workflows: Sub-workflow call and For-each.

Both start *child runs*: full, durable runs of another workflow, linked to the parent by
``(parent run, parent step, item index)``. The parent step stays ``running`` without a
worker (the run is ``waiting``) until its children end; their results come back through
:attr:`backend.engine.model.RunState.children`.

Why a child run per item rather than iteration records inside the parent: each
iteration then has its own step records, attempts, retries, timers and run page, all
durable in PostgreSQL by the same code as any run; the parent's graph stays acyclic; and a
concurrency limit is simply the number of unfinished children.

- ``control.subworkflow``: ``workflow_id``; ``version`` (a pinned number, or empty for the
  active version); ``wait`` (default true: the step ends when the child ends, with the
  child's output; a failed child fails the step with the child's error message and
  ``child_run_id``; false: fire and forget, the step succeeds at once with
  ``{"run_id": child}``); ``input`` (default: the step input).
- ``control.foreach``: ``items`` (a list, usually an expression); ``workflow_id`` and
  ``version`` of the body workflow; ``concurrency`` (children running at once, default 1);
  ``on_item_error``: ``stop`` (default; the first failed item fails the step and cancels
  unfinished items) or ``continue`` (the failed item's result is ``{"error": ...}``). Each
  child's input is ``{"item": value, "index": i, "input": step input}``. Output: the list
  of the children's outputs in item order. An empty list runs nothing and outputs ``[]``.
  With ``wait`` false every item's child starts at once (no concurrency limit, no
  synchronisation) and the step succeeds with ``{"run_ids": [...]}``.
"""

from __future__ import annotations

import uuid
from typing import Any

from designer_schema.catalog import NodeTypeSpec

SUBWORKFLOW = "control.subworkflow"
FOREACH = "control.foreach"
CALL_TYPES = frozenset({SUBWORKFLOW, FOREACH})

_CHILD_NAMESPACE = uuid.UUID("6f1f0c3e-5b7a-4a59-9d0e-2b8f3f7c9a11")

_TARGET_PROPS: dict[str, Any] = {
    "workflow_id": {"type": "string", "title": "Workflow id"},
    "version": {
        "type": ["integer", "null"],
        "title": "Version",
        "description": "Pinned version number; empty runs the active version.",
    },
}

CONTROL_SUBWORKFLOW = NodeTypeSpec(
    type=SUBWORKFLOW,
    label="Sub-workflow",
    kind="control",
    category="Flow",
    icon="call",
    description="Runs another workflow as a child run; waits for it or fires and forgets.",
    config_schema={
        "type": "object",
        "properties": {
            **_TARGET_PROPS,
            "wait": {"type": "boolean", "default": True, "title": "Wait for completion"},
            "input": {"title": "Input", "description": "Child input; empty sends the step input"},
        },
        "required": ["workflow_id"],
    },
    expression_fields=("input",),
)

CONTROL_FOREACH = NodeTypeSpec(
    type=FOREACH,
    label="For each",
    kind="control",
    category="Flow",
    icon="loop",
    description="Runs a body workflow once per list item; outputs the results in item order.",
    config_schema={
        "type": "object",
        "properties": {
            "items": {"title": "Items", "description": "A list, e.g. =body.orders"},
            **_TARGET_PROPS,
            "wait": {"type": "boolean", "default": True, "title": "Wait for all items"},
            "concurrency": {"type": "integer", "default": 1, "minimum": 1, "title": "Concurrency"},
            "on_item_error": {
                "type": "string",
                "enum": ["stop", "continue"],
                "x-enum-labels": {"stop": "Stop", "continue": "Continue with the next items"},
                "default": "stop",
                "title": "On item error",
            },
        },
        "required": ["items", "workflow_id"],
    },
    expression_fields=("items",),
)


def child_run_id(run_id: str, step_id: str, index: int) -> str:
    """Deterministic id of the child run of ``(run, step, item index)`` (UUID 5)."""
    return str(uuid.uuid5(_CHILD_NAMESPACE, f"{run_id}:{step_id}:{index}"))


def child_failed(status: str) -> bool:
    """True for child run statuses that count as a failure of the item."""
    return status in ("failed", "cancelled", "timed_out")
