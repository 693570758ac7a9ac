"""The event loop's slice (backend/engine/expression_slice.py): an inline step whose
expressions run past it is left ready for a worker, not failed, and nothing of it is kept;
without a slice the same step is evaluated to its budget (issue 29, finding 3)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from backend.engine import orchestrator
from backend.engine.expression_slice import LOOP_SLICE_MS, loop_slice
from backend.engine.model import RunState
from backend.engine.states import RunStatus, StepStatus
from backend.services.runs.execution.inline_budget import InlineBudget, Overruns
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import compile_dict

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# a comparator called from Python for each comparison: over 20,000 items, seconds of CPU,
# far past the product's slice (LOOP_SLICE_MS, 20 ms), which it must meet before any other
# limit of the expression (a wider slice lets a fast machine reach a size limit first); the
# cheap step takes well under a millisecond of it. The quick step is held to a wide slice:
# the slice is wall time, and a busy machine descheduling the test must not decide it.
QUICK_SLICE_MS = 250
HEAVY = "=$sort($steps.start.items, function($a, $b) { $a > $b })"


def _run(items: list[int]) -> tuple[object, RunState]:
    graph = compile_dict(
        diagram(
            [
                node("start", "trigger.manual"),
                node("cheap", "control.set", mapping={"n": "=$count(items)"}),
                node("heavy", "control.set", mapping={"sorted": HEAVY}),
                node("after", "control.set", mapping={"done": True}),
            ],
            [edge("start", "cheap"), edge("cheap", "heavy"), edge("heavy", "after")],
        )
    )
    queued = {"run_id": "r", "workflow_id": "w", "version_number": 1, "steps": {}}
    return graph, RunState(**queued, status=RunStatus.QUEUED, input={"items": items})


def test_a_step_past_the_slice_is_left_ready_then_evaluated_without_it() -> None:
    graph, state = _run(list(range(20_000, 0, -1)))
    with loop_slice(LOOP_SLICE_MS) as sliced:
        orchestrator.start(graph, state, NOW)  # type: ignore[arg-type]
    assert sliced.deferred
    heavy = state.steps["heavy"]
    assert state.steps["cheap"].status == StepStatus.SUCCEEDED  # cheap work stays here
    assert heavy.status == StepStatus.READY and heavy.attempts == 0 and heavy.output is None
    assert "after" not in state.steps or state.steps["after"].status != StepStatus.SUCCEEDED
    assert orchestrator.inline_ready(graph, state) == ["heavy"]  # type: ignore[arg-type]
    orchestrator.advance(graph, state, NOW)  # type: ignore[arg-type]  # a worker: no slice
    assert heavy.status in (StepStatus.SUCCEEDED, StepStatus.FAILED)
    if heavy.status == StepStatus.FAILED:  # at the expression budget, not the slice
        assert "time limit of 1000 ms" in str(heavy.error)


def test_a_quick_step_is_not_held_by_the_slice() -> None:
    graph, state = _run([3, 1, 2])
    with loop_slice(QUICK_SLICE_MS) as sliced:
        orchestrator.start(graph, state, NOW)  # type: ignore[arg-type]
    assert not sliced.deferred
    assert state.steps["heavy"].output == {"sorted": [1, 2, 3]}
    assert state.status == RunStatus.SUCCEEDED


def test_a_version_whose_step_was_left_evaluates_nothing_here_for_a_while() -> None:
    now = [0.0]
    memo = Overruns(seconds=60, clock=lambda: now[0])
    version = uuid.uuid4()
    budget = memo.budget(version)
    budget.deferred = True
    memo.record(version, budget)
    heavy = memo.budget(version)
    assert heavy() is True and heavy.left_work  # not even one inline step
    memo.record(version, heavy)  # its own starts do not extend the memo
    now[0] = 61.0
    assert memo.budget(version).seconds > 0
    assert InlineBudget(0.0).left_work is False
