"""Which steps are ready: the pure ready-step computation.

A transition ``source:port -> target`` is *activated* when its source finished (succeeded,
or failed with the failure routed to a port) and took ``port``; it is *dead* when the
source finished without taking that port or was skipped; otherwise it is *unresolved*.

A pending step with incoming transitions becomes, by its compiled ``Step.join`` (the
reserved config key ``join``, or a Join node's ``mode``/``count``: the compiler decides,
the planner never reads node config):

- ``join.mode == "all"`` (the default for every step): ready once no incoming transition
  is unresolved and at least one is activated; skipped when all are dead (dead-path
  elimination: a branch not taken never blocks a join).
- ``"first"``: ready at the first activated transition; skipped when all are dead.
- ``"n_of_m"``: ready once ``count`` transitions are activated, or once every transition is
  resolved with at least one activated (it can never reach ``count``: it fires with what
  arrived instead of waiting forever); skipped when all are dead.

Skips cascade, so :func:`plan` iterates to a fixed point.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from backend.engine.model import StepRecord
from backend.engine.states import StepStatus
from designer_schema.graph import Transition, WorkflowGraph

_FINISHED = frozenset({StepStatus.SUCCEEDED, StepStatus.FAILED})


@dataclass
class Plan:
    """Result of :func:`plan`: step ids to make ready and to skip, in graph order."""

    ready: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def transition_state(t: Transition, steps: Mapping[str, StepRecord]) -> str:
    """Return ``"activated"``, ``"dead"`` or ``"unresolved"`` for transition ``t``."""
    source = steps.get(t.source)
    if source is None:
        return "unresolved"
    if source.status in _FINISHED:
        return "activated" if t.source_port in source.ports else "dead"
    if source.status in (StepStatus.SKIPPED, StepStatus.CANCELLED):
        return "dead"
    return "unresolved"


def plan(graph: WorkflowGraph, steps: Mapping[str, StepRecord]) -> Plan:
    """Compute which pending steps become ready or skipped.

    ``steps`` maps step id to its record; a missing id counts as pending. The mapping is
    not modified: the result says what to change. The trigger step (no incoming
    transitions) is never returned: it is completed when the run starts.
    """
    status: dict[str, StepStatus] = {
        s.id: (steps[s.id].status if s.id in steps else StepStatus.PENDING) for s in graph.steps
    }
    view: dict[str, StepRecord] = dict(steps)
    result = Plan()
    changed = True
    while changed:
        changed = False
        for step in graph.steps:
            if status[step.id] != StepStatus.PENDING:
                continue
            incoming = graph.incoming(step.id)
            if not incoming:
                continue
            states = [transition_state(t, view) for t in incoming]
            activated = states.count("activated")
            unresolved = states.count("unresolved")
            decision = _decide(step.join.mode, step.join.count, activated, unresolved)
            if decision is None:
                continue
            status[step.id] = decision
            view[step.id] = StepRecord(step_id=step.id, status=decision)
            if decision == StepStatus.READY:
                result.ready.append(step.id)
            else:
                result.skipped.append(step.id)
                changed = True
    return result


def _decide(mode: str, count: int, activated: int, unresolved: int) -> StepStatus | None:
    if activated == 0 and unresolved == 0:
        return StepStatus.SKIPPED
    if mode == "first":
        return StepStatus.READY if activated else None
    if mode == "n_of_m":
        if activated >= max(count, 1) or (unresolved == 0 and activated > 0):
            return StepStatus.READY
        return None
    return StepStatus.READY if unresolved == 0 and activated > 0 else None


def activated_sources(
    graph: WorkflowGraph, step_id: str, steps: Mapping[str, StepRecord]
) -> list[str]:
    """Ids of the sources whose transitions into ``step_id`` are activated, graph order."""
    seen: list[str] = []
    for t in graph.incoming(step_id):
        if transition_state(t, steps) == "activated" and t.source not in seen:
            seen.append(t.source)
    return seen
