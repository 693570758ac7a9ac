"""The inline budget of a start and the per-version memo of starts that ran out of it
(backend/services/runs/execution/inline_budget.py)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

from backend.engine import orchestrator
from backend.engine.model import RunState
from backend.engine.states import RunStatus, StepStatus
from backend.services.runs.execution.inline_budget import (
    INLINE_BUDGET_SECONDS,
    OVERRUN_STRIKES,
    InlineBudget,
    Overruns,
)
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import compile_dict

V1, V2, V3 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _spent(budget: InlineBudget) -> InlineBudget:
    budget.spent = True
    return budget


def _overrun(memo: Overruns, version: uuid.UUID) -> None:
    """Starts of ``version`` that ran out of their whole budget, enough to be remembered."""
    for _ in range(OVERRUN_STRIKES):
        budget = memo.budget(version)
        assert budget.seconds == INLINE_BUDGET_SECONDS
        memo.record(version, _spent(budget))


def test_a_version_that_overran_gets_the_least_budget_until_the_memo_expires() -> None:
    clock = FakeClock()
    memo = Overruns(seconds=60, clock=clock)
    _overrun(memo, V1)
    assert memo.remembers(V1)
    assert memo.budget(V1).seconds == 0
    assert memo.budget(V2).seconds == INLINE_BUDGET_SECONDS  # other versions unaffected
    clock.now += 59
    least = memo.budget(V1)
    memo.record(V1, _spent(least))  # a least-budget start that ran out does not extend it
    clock.now += 2
    assert not memo.remembers(V1)
    assert memo.budget(V1).seconds == INLINE_BUDGET_SECONDS  # judged anew


def test_one_overrun_alone_is_not_remembered() -> None:
    memo = Overruns(clock=FakeClock())
    memo.record(V1, _spent(memo.budget(V1)))
    assert not memo.remembers(V1)
    memo.record(V1, memo.budget(V1))  # the next start fitted: the strike is forgotten
    memo.record(V1, _spent(memo.budget(V1)))
    assert not memo.remembers(V1)
    memo.record(V1, _spent(memo.budget(V1)))
    assert memo.remembers(V1)


def test_a_start_that_did_not_run_out_forgets_the_version() -> None:
    memo = Overruns(clock=FakeClock())
    _overrun(memo, V1)
    least = memo.budget(V1)
    assert least.seconds == 0
    memo.record(V1, least)  # the run's inline work fitted into one step
    assert not memo.remembers(V1)
    assert memo.budget(V1).seconds == INLINE_BUDGET_SECONDS


def test_the_memo_keeps_the_most_recently_overrun_versions() -> None:
    memo = Overruns(size=2, clock=FakeClock())
    for version in (V1, V2, V3):
        _overrun(memo, version)
    assert [memo.remembers(v) for v in (V1, V2, V3)] == [False, True, True]


def _new_run() -> RunState:
    return RunState(
        run_id="run-1",
        workflow_id="wf-1",
        version_number=1,
        status=RunStatus.QUEUED,
        input={"i": 0},
        steps={},
    )


def test_the_least_budget_evaluates_exactly_one_inline_step() -> None:
    nodes = [node("start", "trigger.manual")]
    edges = []
    for i in range(5):
        nodes.append(node(f"s{i}", "control.set", mapping={"i": "=i + 1"}))
        edges.append(edge("start" if i == 0 else f"s{i - 1}", f"s{i}"))
    graph = compile_dict(diagram(nodes, edges))
    state = _new_run()
    budget = InlineBudget(0.0)
    orchestrator.start(graph, state, datetime(2026, 1, 1, tzinfo=UTC), should_yield=budget)
    assert budget.spent
    assert state.steps["s0"].status == StepStatus.SUCCEEDED
    assert state.steps["s0"].output == {"i": 1}
    assert state.steps["s1"].status == StepStatus.READY
    assert orchestrator.inline_ready(graph, state) == ["s1"]
    assert state.status == RunStatus.RUNNING


def test_the_budget_counts_the_threads_cpu_time_not_pauses() -> None:
    """A process paused by the operating system (here: asleep) has not spent its budget;
    evaluating (here: a busy loop) has."""
    budget = InlineBudget(0.005)
    assert budget() is False  # starts the clock
    time.sleep(0.05)  # ten budgets of wall time, almost no CPU time
    assert budget() is False and not budget.spent
    start = time.thread_time()
    while time.thread_time() - start < 0.01:
        pass
    assert budget() is True and budget.spent
