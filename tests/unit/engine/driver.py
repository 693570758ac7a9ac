"""A pure, in-memory driver of the engine for unit and golden tests (no I/O).

It compiles a diagram with the engine's control nodes plus fake action node types, starts
a run and executes dispatched action steps with Python callables, in dispatch order,
recording the order in which steps finished.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from backend.engine import orchestrator
from backend.engine.control import CONTROL_NODE_TYPES
from backend.engine.expressions import JsonataChecker
from backend.engine.model import RunState
from backend.engine.states import RunStatus, StepStatus
from designer_schema.catalog import NodeTypeSpec, StaticCatalog
from designer_schema.compiler import compile_diagram
from designer_schema.diagram import Diagram
from designer_schema.graph import WorkflowGraph

ACTION = NodeTypeSpec(
    type="test.action",
    label="Test action",
    kind="action",
    config_schema={"type": "object", "properties": {"name": {"type": "string"}}},
    expression_fields=("name",),
)
CATALOG = StaticCatalog([*CONTROL_NODE_TYPES, ACTION])
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class ActionFailed(Exception):
    """Raised by a fake action to fail its attempt."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def compile_dict(d: dict[str, Any]) -> WorkflowGraph:
    """Compile a diagram dict; fails the test on any diagnostic."""
    graph, diagnostics = compile_diagram(msgspec.convert(d, Diagram), CATALOG, JsonataChecker())
    assert graph is not None, diagnostics
    return graph


def run_graph(
    graph: WorkflowGraph,
    run_input: Any,
    actions: dict[str, Callable[[Any], Any]] | None = None,
) -> tuple[RunState, list[str]]:
    """Run ``graph`` to the end; ``actions`` maps step id -> fn(input) -> output.

    Returns the final state and the ids of steps in the order they finished (skips
    excluded).
    """
    actions = actions or {}
    state = RunState(
        run_id="run-1",
        workflow_id="wf-1",
        version_number=1,
        status=RunStatus.QUEUED,
        input=run_input,
        steps={},
    )
    now = T0
    finished: list[str] = []

    def note() -> None:
        for ev in state.events:
            if ev.kind in ("step.succeeded", "step.failed") and ev.step_id not in finished:
                finished.append(str(ev.step_id))
        state.events.clear()

    queue = orchestrator.start(graph, state, now)
    note()
    guard = 0
    while queue:
        guard += 1
        assert guard < 10_000, "engine did not terminate"
        step_id = queue.pop(0)
        rec = state.steps[step_id]
        if rec.status != StepStatus.READY:
            continue
        now += timedelta(seconds=1)
        if rec.not_before and rec.not_before > now:
            now = rec.not_before
        rec.move(StepStatus.RUNNING)
        rec.attempts += 1
        fn = actions.get(step_id, lambda data: {"echo": data})
        try:
            output = fn(rec.input)
        except ActionFailed as exc:
            more, delay = orchestrator.fail_action(
                graph,
                state,
                step_id,
                {"message": str(exc), "kind": "test"},
                now,
                retryable=exc.retryable,
            )
            queue.extend(more)
            if delay is not None:
                queue.append(step_id)
        else:
            queue.extend(orchestrator.complete_action(graph, state, step_id, output, now))
        note()
    return state, finished
