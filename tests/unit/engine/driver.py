"""A pure, in-memory driver of the engine for unit and golden tests (no I/O).

It compiles diagrams with the engine's control and flow nodes plus a fake action node
type, and runs them as a discrete-event simulation on a fake clock: an action step takes
``durations[step_id]`` seconds (default 1) from dispatch to completion, durable timers fire
at their due time, child runs (Sub-workflow, For-each) run as separate runs of the graphs in
``workflows`` and report back to their parent. Ties are resolved in dispatch order, so every
run is deterministic. The order in which steps finished is recorded per run.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from backend.engine import orchestrator
from backend.engine.expressions import JsonataChecker
from backend.engine.model import ChildRun, RunState
from backend.engine.nodes import NODE_TYPES, NodeRegistry
from backend.engine.states import RunStatus, StepStatus
from designer_schema.catalog import Catalog, NodeTypeSpec, StaticCatalog
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
CATALOG = StaticCatalog([*NODE_TYPES.latest_specs(), ACTION])
T0 = datetime(2026, 1, 1, tzinfo=UTC)

Action = Callable[[Any], Any]


class ActionFailed(Exception):
    """Raised by a fake action to fail its attempt."""

    def __init__(self, message: str, *, retryable: bool = False, kind: str = "test") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.kind = kind


def compile_dict(d: dict[str, Any], catalog: Catalog = CATALOG) -> WorkflowGraph:
    """Compile a diagram dict; fails the test on any diagnostic."""
    graph, diagnostics = compile_diagram(msgspec.convert(d, Diagram), catalog, JsonataChecker())
    assert graph is not None, diagnostics
    return graph


@dataclass
class SimRun:
    """One run inside the simulation: its graph, state and finish order."""

    graph: WorkflowGraph
    state: RunState
    finished: list[str] = field(default_factory=list)
    parent: tuple[str, str, int] | None = None


class Sim:
    """Discrete-event simulation of runs (see module docstring).

    ``actions`` maps step id -> fn(input) -> output (raise :class:`ActionFailed` to fail);
    the same step id in a child workflow uses the same fn. ``workflows`` maps workflow id ->
    graph for Sub-workflow and For-each targets.
    """

    def __init__(
        self,
        actions: dict[str, Action] | None = None,
        durations: dict[str, float] | None = None,
        workflows: dict[str, WorkflowGraph] | None = None,
        nodes: NodeRegistry = NODE_TYPES,
    ) -> None:
        self.nodes = nodes
        self.actions = actions or {}
        self.durations = durations or {}
        self.workflows = workflows or {}
        self.runs: dict[str, SimRun] = {}
        self.now = T0
        self._heap: list[tuple[datetime, int, str, str, str, Any]] = []
        self._seq = 0
        self.calls: list[tuple[str, str]] = []
        self.log: list[tuple[str, str, str | None]] = []

    def _push(self, at: datetime, kind: str, run_id: str, step_id: str, data: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, run_id, step_id, data))

    def start(
        self,
        graph: WorkflowGraph,
        run_input: Any,
        run_id: str = "run-1",
        parent: tuple[str, str, int] | None = None,
    ) -> SimRun:
        """Create and start a run; returns it (run :meth:`run_all` to drive it)."""
        state = RunState(
            run_id=run_id,
            workflow_id="wf-1",
            version_number=1,
            status=RunStatus.QUEUED,
            input=run_input,
            steps={},
        )
        sim_run = SimRun(graph, state, parent=parent)
        self.runs[run_id] = sim_run
        self._after(sim_run, orchestrator.start(graph, state, self.now, nodes=self.nodes))
        return sim_run

    def cancel(self, run_id: str, reason: str = "cancelled by test") -> None:
        """Cancel a run (and, through the engine, its children) at the current time."""
        sim_run = self.runs[run_id]
        orchestrator.cancel(sim_run.state, self.now, reason)
        self._after(sim_run, [])

    def run_all(self, until: datetime | None = None) -> None:
        """Process events until nothing is left (or the next one is after ``until``)."""
        guard = 0
        while self._heap:
            if until is not None and self._heap[0][0] > until:
                self.now = until
                return
            guard += 1
            assert guard < 100_000, "engine did not terminate"
            at, _, kind, run_id, step_id, data = heapq.heappop(self._heap)
            self.now = max(self.now, at)
            sim_run = self.runs[run_id]
            state, graph = sim_run.state, sim_run.graph
            if kind == "timer":
                self._after(
                    sim_run,
                    orchestrator.fire_timer(graph, state, step_id, self.now, nodes=self.nodes),
                )
            elif kind == "exec":
                self._exec(sim_run, step_id)
            elif kind == "done":
                self._complete(sim_run, step_id, data)

    def _exec(self, sim_run: SimRun, step_id: str) -> None:
        state = sim_run.state
        rec = state.steps[step_id]
        if state.status.terminal or rec.status != StepStatus.READY:
            return
        if rec.not_before and rec.not_before > self.now:
            self._push(rec.not_before, "exec", state.run_id, step_id)
            return
        if state.status == RunStatus.PAUSED:
            return
        rec.move(StepStatus.RUNNING)
        rec.attempts += 1
        self.calls.append((state.run_id, step_id))
        fn = self.actions.get(step_id, lambda data: {"echo": data})
        try:
            outcome: Any = ("ok", fn(rec.input))
        except ActionFailed as exc:
            outcome = ("failed", exc)
        at = self.now + timedelta(seconds=self.durations.get(step_id, 1.0))
        self._push(at, "done", state.run_id, step_id, outcome)

    def _complete(self, sim_run: SimRun, step_id: str, outcome: Any) -> None:
        state, graph = sim_run.state, sim_run.graph
        rec = state.steps[step_id]
        if state.status.terminal or rec.status != StepStatus.RUNNING:
            return
        if outcome[0] == "ok":
            more = orchestrator.complete_action(
                graph, state, step_id, outcome[1], self.now, nodes=self.nodes
            )
        else:
            exc = outcome[1]
            more, delay = orchestrator.fail_action(
                graph,
                state,
                step_id,
                {"message": str(exc), "kind": exc.kind},
                self.now,
                retryable=exc.retryable,
                nodes=self.nodes,
            )
            if delay is not None:
                more = [*more, step_id]
        self._after(sim_run, more)

    def _after(self, sim_run: SimRun, dispatch: list[str]) -> None:
        """Record finishes, schedule dispatched work, create/cancel children, report up."""
        state, graph = sim_run.state, sim_run.graph
        for ev in state.events:
            self.log.append((state.run_id, ev.kind, ev.step_id))
            if ev.kind in ("step.succeeded", "step.failed") and ev.step_id not in sim_run.finished:
                sim_run.finished.append(str(ev.step_id))
        state.events.clear()
        for sid in dispatch:
            rec = state.steps[sid]
            if orchestrator.behaviour_kind(graph.step(sid), self.nodes) == "timer":
                self._push(rec.not_before or self.now, "timer", state.run_id, sid)
            else:
                self._push(rec.not_before or self.now, "exec", state.run_id, sid)
        requests, state.child_requests = state.child_requests, []
        cancels, state.child_cancels = state.child_cancels, []
        for req in requests:
            child_graph = self.workflows.get(req.workflow_id)
            entry = ChildRun(step_id=req.step_id, index=req.index, run_id=req.run_id)
            if req.wait:
                state.children.setdefault(req.step_id, []).append(entry)
            if child_graph is None:
                entry.status = "failed"
                entry.error = {"message": f"workflow {req.workflow_id} not found"}
                continue
            parent = (state.run_id, req.step_id, req.index) if req.wait else None
            self.start(child_graph, req.input, run_id=req.run_id, parent=parent)
        if requests:
            self._after(sim_run, orchestrator.advance(graph, state, self.now, nodes=self.nodes))
        for child_id in cancels:
            child = self.runs.get(child_id)
            if child is not None and not child.state.status.terminal:
                orchestrator.cancel(child.state, self.now, "parent step ended")
                self._after(child, [])
        if state.status.terminal and sim_run.parent is not None:
            self._report(sim_run)

    def _report(self, child: SimRun) -> None:
        assert child.parent is not None
        parent_id, step_id, index = child.parent
        parent = self.runs[parent_id]
        for entry in parent.state.children.get(step_id, []):
            if entry.index == index and not RunStatus(entry.status).terminal:
                entry.status = child.state.status.value
                entry.output = child.state.output
                entry.error = child.state.error
                self._after(
                    parent,
                    orchestrator.advance(parent.graph, parent.state, self.now, nodes=self.nodes),
                )


def run_graph(
    graph: WorkflowGraph,
    run_input: Any,
    actions: dict[str, Action] | None = None,
    *,
    durations: dict[str, float] | None = None,
    workflows: dict[str, WorkflowGraph] | None = None,
    nodes: NodeRegistry = NODE_TYPES,
) -> tuple[RunState, list[str]]:
    """Run ``graph`` to the end in a fresh :class:`Sim`.

    Returns the final state and the ids of steps in the order they finished (skips
    excluded).
    """
    sim = Sim(actions, durations, workflows, nodes)
    root = sim.start(graph, run_input)
    sim.run_all()
    return root.state, root.finished
