"""The variables expressions see: ``$trigger``, ``$steps`` (id -> output) and ``$run``."""

from __future__ import annotations

from typing import Any

from backend.engine.model import RunState
from backend.engine.states import StepStatus
from designer_schema.graph import WorkflowGraph


def bindings(graph: WorkflowGraph, state: RunState) -> dict[str, Any]:
    """Expression variables: ``$trigger``, ``$steps`` (id -> output) and ``$run``."""
    steps = {
        sid: rec.output
        for sid, rec in state.steps.items()
        if rec.status in (StepStatus.SUCCEEDED, StepStatus.FAILED)
    }
    return {
        "trigger": steps.get(graph.trigger),
        "steps": steps,
        "run": {
            "id": state.run_id,
            "workflow_id": state.workflow_id,
            "version": state.version_number,
        },
    }


class LazyBindings:
    """The expression bindings of one :func:`advance`, built on first use (an advance
    that evaluates nothing never builds them) and kept current as steps finish."""

    def __init__(self, graph: WorkflowGraph, state: RunState) -> None:
        self._graph = graph
        self._state = state
        self._context: dict[str, Any] | None = None

    def get(self) -> dict[str, Any]:
        """The bindings (built now on first use)."""
        if self._context is None:
            self._context = bindings(self._graph, self._state)
        return self._context

    def record(self, step_id: str) -> None:
        """A finished step's output joins ``$steps`` (when the bindings exist)."""
        rec = self._state.steps[step_id]
        if self._context is not None and rec.status in (StepStatus.SUCCEEDED, StepStatus.FAILED):
            self._context["steps"][step_id] = rec.output
