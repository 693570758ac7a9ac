"""Attempts that end without an outcome (lost worker, hand-back at shutdown) use up no
retry, and a step whose workers are lost again and again fails (backend/engine/
unfinished_attempts.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from backend.engine import orchestrator
from backend.engine.model import RunState
from backend.engine.outcomes import AttemptFailed
from backend.engine.states import RunStatus, StepStatus
from backend.engine.unfinished_attempts import MAX_LOST_LEASES, counted_attempts
from designer_schema.graph import WorkflowGraph
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import T0, compile_dict


def graph(retry: dict[str, Any] | None = None) -> WorkflowGraph:
    config: dict[str, Any] = {"retry": retry} if retry else {}
    return compile_dict(
        diagram(
            [node("hook", "trigger.webhook"), node("call", "test.action", **config)],
            [edge("hook", "call")],
        )
    )


def started(g: WorkflowGraph) -> RunState:
    state = RunState(
        run_id="r1",
        workflow_id="wf-1",
        version_number=1,
        status=RunStatus.QUEUED,
        input={},
        steps={},
    )
    assert orchestrator.start(g, state, T0) == ["call"]
    return state


def claim(state: RunState) -> int:
    """What a worker's claim does to the step record (step_changes.claim_attempt)."""
    rec = state.steps["call"]
    rec.move(StepStatus.RUNNING)
    rec.attempts += 1
    return rec.attempts


def fail(g: WorkflowGraph, state: RunState) -> tuple[list[str], float | None]:
    outcome = AttemptFailed({"message": "boom", "kind": "http_error"}, retryable=True)
    return orchestrator.record_outcome(g, state, "call", outcome, T0 + timedelta(seconds=1))


def test_lost_and_handed_back_attempts_use_up_no_retry() -> None:
    g = graph({"max_attempts": 2, "initial_interval": 1, "jitter": 0})
    state = started(g)
    first = claim(state)
    assert orchestrator.reopen_attempt(g, state, "call", first, T0, lost=True) == ["call"]
    rec = state.steps["call"]
    assert rec.status == StepStatus.READY and rec.not_before == T0
    second = claim(state)
    assert orchestrator.reopen_attempt(g, state, "call", second, T0, lost=False) == ["call"]
    claim(state)  # attempt 3, the first that counts
    assert counted_attempts(rec) == 1
    assert fail(g, state) == ([], 1.0)  # retried: 1 of 2 counted attempts used
    assert rec.status == StepStatus.READY
    claim(state)
    fail(g, state)
    assert rec.status == StepStatus.FAILED
    assert rec.attempts == 4 and counted_attempts(rec) == 2
    kinds = [e.kind for e in state.events]
    assert "step.lease_expired" in kinds and "step.handed_back" in kinds


def test_default_policy_survives_one_lost_worker() -> None:
    g = graph()  # one attempt, no retry
    state = started(g)
    first = claim(state)
    assert orchestrator.reopen_attempt(g, state, "call", first, T0, lost=True) == ["call"]
    claim(state)
    assert orchestrator.complete_action(g, state, "call", {"ok": 1}, T0) == []
    assert state.status == RunStatus.SUCCEEDED


def test_a_step_that_keeps_losing_its_worker_fails() -> None:
    g = graph({"max_attempts": 5, "initial_interval": 1, "jitter": 0})
    state = started(g)
    for _ in range(MAX_LOST_LEASES - 1):
        number = claim(state)
        assert orchestrator.reopen_attempt(g, state, "call", number, T0, lost=True) == ["call"]
    number = claim(state)
    assert orchestrator.reopen_attempt(g, state, "call", number, T0, lost=True) == []
    rec = state.steps["call"]
    assert rec.status == StepStatus.FAILED
    assert rec.error is not None and rec.error["kind"] == "lease_expired"
    assert f"lost {MAX_LOST_LEASES} times" in rec.error["message"]
    assert state.status == RunStatus.FAILED


def test_hand_backs_never_fail_the_step() -> None:
    g = graph()
    state = started(g)
    for _ in range(MAX_LOST_LEASES + 2):
        number = claim(state)
        assert orchestrator.reopen_attempt(g, state, "call", number, T0, lost=False) == ["call"]
    assert state.steps["call"].status == StepStatus.READY


def test_reopening_a_step_that_is_not_running_changes_nothing() -> None:
    g = graph()
    state = started(g)
    before = len(state.events)
    assert orchestrator.reopen_attempt(g, state, "call", 1, T0, lost=True) == ["call"]
    assert state.steps["call"].status == StepStatus.READY
    assert len(state.events) == before
