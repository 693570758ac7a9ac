"""The graph a test run executes: the draft's compiled graph with data substituted.

Pure functions over :class:`~designer_schema.graph.WorkflowGraph` (no I/O).

- *Test workflow*: every step with pinned data is replaced by a ``test.pinned`` step
  (:mod:`backend.engine.nodes.pinned_output`) that outputs the pinned data without running.
- *Test step* (``target``): the graph is cut down to the target and the steps it depends
  on (its ancestors); every ancestor with pinned data, else with an output in the last
  run, is replaced the same way, so usually only the target executes. An ancestor with
  neither runs for real.

The trigger is never replaced: its output is the run input, which the caller picks
(pinned trigger data, else the last run's input). Like n8n's pinned data, the idea is that
a test run calls nothing it does not have to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from backend.engine.nodes.pinned_output import PINNED_TYPE
from designer_schema.graph import ERROR_PORT, Step, WorkflowGraph, canonical_hash

PINNED = "pinned"
LAST_RUN = "last_run"


class UnknownStep(LookupError):
    """The step asked for is not in the draft's graph."""


@dataclass
class TestPlan:
    """A test run's graph and what it does.

    ``graph``: the snapshot to execute (content hash recomputed); ``substituted``: step id ->
    ``pinned`` or ``last_run`` for each step replaced by its data; ``executes``: ids of the
    action steps that really run (connectors called: HTTP requests sent, messages posted,
    emails delivered), in graph order.
    """

    graph: WorkflowGraph
    substituted: dict[str, str] = field(default_factory=dict)
    executes: list[str] = field(default_factory=list)


def ancestors(graph: WorkflowGraph, step_id: str) -> set[str]:
    """Every step from which ``step_id`` can be reached (not ``step_id`` itself unless it
    lies on a loop)."""
    found: set[str] = set()
    todo = [t.source for t in graph.incoming(step_id)]
    while todo:
        sid = todo.pop()
        if sid in found:
            continue
        found.add(sid)
        todo.extend(t.source for t in graph.incoming(sid))
    return found


def pinned_step(step: Step, data: Any) -> Step:
    """``step`` replaced by a ``test.pinned`` step outputting ``data`` through its main
    output port (``out`` when it has one, else its first non-error port)."""
    ports = [p for p in step.outputs if p != ERROR_PORT] or ["out"]
    port = "out" if "out" in ports else ports[0]
    return msgspec.structs.replace(
        step,
        type=PINNED_TYPE,
        kind="control",
        type_version=1,
        config={"data": data, "port": port, "replaces": step.type},
        expressions={},
        timeout=None,
        on_error="fail",
    )


def plan_test(
    graph: WorkflowGraph,
    pins: dict[str, Any],
    *,
    target: str | None = None,
    last_outputs: dict[str, Any] | None = None,
) -> TestPlan:
    """The :class:`TestPlan` of a test run of ``graph``.

    ``pins``: step id -> pinned data (pins of steps not in the graph are ignored);
    ``target``: the step of a *Test step* (``None``: the whole workflow); ``last_outputs``:
    step id -> output in the last run, used for a target's ancestors without pins.
    Raises :class:`UnknownStep` when ``target`` is not a step of ``graph``.
    """
    ids = {s.id for s in graph.steps}
    if target is not None and target not in ids:
        raise UnknownStep(f"step {target!r} is not in the draft (save the draft first?)")
    keep = ids if target is None else ancestors(graph, target) | {target}
    last = last_outputs or {}
    steps: list[Step] = []
    substituted: dict[str, str] = {}
    for step in graph.steps:
        if step.id not in keep:
            continue
        if step.id != graph.trigger and step.id in pins:
            steps.append(pinned_step(step, pins[step.id]))
            substituted[step.id] = PINNED
        elif step.id not in (graph.trigger, target) and step.id in last:
            steps.append(pinned_step(step, last[step.id]))
            substituted[step.id] = LAST_RUN
        else:
            steps.append(step)
    transitions = [t for t in graph.transitions if t.source in keep and t.target in keep]
    snapshot = msgspec.structs.replace(graph, steps=steps, transitions=transitions, content_hash="")
    snapshot = msgspec.structs.replace(snapshot, content_hash=canonical_hash(snapshot))
    executes = [s.id for s in steps if s.kind == "action"]
    return TestPlan(snapshot, substituted, executes)
