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

import heapq
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from backend.engine.model import StepRecord
from backend.engine.states import StepStatus
from designer_schema.graph import Step, Transition, WorkflowGraph

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


def plan(
    graph: WorkflowGraph,
    steps: Mapping[str, StepRecord],
    candidates: Iterable[str] | None = None,
) -> Plan:
    """Compute which pending steps become ready or skipped.

    ``steps`` maps step id to its record; a missing id counts as pending. The mapping is
    not modified: the result says what to change. The trigger step (no incoming
    transitions) is never returned: it is completed when the run starts.

    ``candidates`` limits the pass to the steps whose incoming transitions may have
    changed since the last plan (the targets of steps that finished or were skipped);
    ``None`` examines every step. Either way the decisions and their order are those of
    passes over the whole graph in graph order, repeated while a skip cascades, so the
    cost is proportional to the candidates and their transitions, not to the graph.
    """
    index = graph_index(graph)
    decided: dict[str, StepRecord] = {}
    view = _Overlay(decided, steps)
    result = Plan()
    todo = list(range(len(graph.steps))) if candidates is None else _positions(index, candidates)
    while todo:
        heapq.heapify(todo)
        later: list[int] = []
        seen: set[int] = set()
        while todo:
            position = heapq.heappop(todo)
            if position in seen:
                continue
            seen.add(position)
            step = graph.steps[position]
            decision = _decide_step(graph, step, view)
            if decision is None:
                continue
            decided[step.id] = StepRecord(step_id=step.id, status=decision)
            if decision == StepStatus.READY:
                result.ready.append(step.id)
                continue
            result.skipped.append(step.id)
            for t in graph.outgoing(step.id):  # the skip may decide its targets
                target = index.get(t.target)
                if target is None:
                    continue
                if target > position and target not in seen:
                    heapq.heappush(todo, target)  # still ahead in this pass
                else:
                    later.append(target)  # the next pass
        todo = later
    return result


def _decide_step(
    graph: WorkflowGraph, step: Step, view: Mapping[str, StepRecord]
) -> StepStatus | None:
    """The decision for one step: ready, skipped or ``None`` (not pending, or undecided)."""
    record = view.get(step.id)
    if record is not None and record.status != StepStatus.PENDING:
        return None
    incoming = graph.incoming(step.id)
    if not incoming:
        return None
    states = [transition_state(t, view) for t in incoming]
    return _decide(
        step.join.mode, step.join.count, states.count("activated"), states.count("unresolved")
    )


class _Overlay(Mapping[str, StepRecord]):
    """``decided`` records over ``base`` without copying ``base``."""

    def __init__(self, decided: dict[str, StepRecord], base: Mapping[str, StepRecord]) -> None:
        self._decided = decided
        self._base = base

    def __getitem__(self, key: str) -> StepRecord:
        found = self._decided.get(key)
        return found if found is not None else self._base[key]

    def get(self, key: str, default: Any = None) -> Any:
        found = self._decided.get(key)
        return found if found is not None else self._base.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter({**self._base, **self._decided})

    def __len__(self) -> int:
        return len({**self._base, **self._decided})


def graph_index(graph: WorkflowGraph) -> dict[str, int]:
    """Step id -> position in graph order (the first step of an id), kept with the graph
    (a graph is never mutated once built)."""
    cached = graph.__dict__.get("_planner_index")
    if cached is None:
        cached = {}
        for position, step in enumerate(graph.steps):
            cached.setdefault(step.id, position)
        graph.__dict__["_planner_index"] = cached
    return cast(dict[str, int], cached)


def _positions(index: dict[str, int], step_ids: Iterable[str]) -> list[int]:
    return [index[sid] for sid in set(step_ids) if sid in index]


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
