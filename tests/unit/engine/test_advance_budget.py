"""A start that spends its inline budget and is continued later reaches the same state as
a start that evaluates every inline step at once (the API hands the rest to a worker)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from backend.engine import orchestrator
from backend.engine.model import RunState
from backend.engine.states import RunStatus, StepStatus
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import compile_dict

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _graph() -> Any:
    """Set -> If (true: two Sets joined; false: a Set) -> Join -> action, plus a
    Set chain, so yields fall inside branches, before a join and before an action."""
    nodes = [
        node("start", "trigger.manual"),
        node("a", "control.set", mapping={"n": "=n + 1"}),
        node("check", "control.if", condition="=n > 1"),
        node("t1", "control.set", mapping={"branch": "true", "n": "=n"}),
        node("t2", "control.set", mapping={"twice": "=$steps.a.n * 2"}),
        node("f1", "control.set", mapping={"branch": "false"}),
        node("join", "control.join"),
        node("act", "test.action"),
    ]
    edges = [
        edge("start", "a"),
        edge("a", "check"),
        edge("check", "t1", "true"),
        edge("check", "f1", "false"),
        edge("t1", "t2"),
        edge("t2", "join"),
        edge("f1", "join"),
        edge("join", "act"),
    ]
    for i in range(6):
        nodes.append(node(f"c{i}", "control.set", mapping={"i": i, "prev": "=$"}))
        edges.append(edge("start" if i == 0 else f"c{i - 1}", f"c{i}"))
    return compile_dict(diagram(nodes, edges))


def _state(n: int) -> RunState:
    return RunState(
        run_id="run-1",
        workflow_id="wf-1",
        version_number=1,
        status=RunStatus.QUEUED,
        input={"n": n},
        steps={},
    )


def _outcome(state: RunState) -> dict[str, Any]:
    return {
        "status": state.status,
        "steps": {
            sid: (rec.status, rec.ports, rec.input, rec.output)
            for sid, rec in sorted(state.steps.items())
        },
    }


@pytest.mark.parametrize("n", [0, 5])
@pytest.mark.parametrize("allowed", range(0, 12))
def test_yielding_start_then_advance_matches_a_full_start(n: int, allowed: int) -> None:
    graph = _graph()
    full = _state(n)
    full_dispatch = orchestrator.start(graph, full, NOW)

    calls = 0

    def should_yield() -> bool:
        nonlocal calls
        calls += 1
        return calls > allowed

    partial = _state(n)
    dispatch = orchestrator.start(graph, partial, NOW, should_yield=should_yield)
    left = orchestrator.inline_ready(graph, partial)
    if calls > allowed:
        assert left, "a start that yielded leaves inline steps ready"
        assert all(partial.steps[sid].status == StepStatus.READY for sid in left)
        assert partial.status == RunStatus.RUNNING
    dispatch += orchestrator.advance(graph, partial, NOW)

    assert orchestrator.inline_ready(graph, partial) == []
    assert sorted(dispatch) == sorted(full_dispatch) == ["act"]
    assert _outcome(partial) == _outcome(full)


def _stored(state: RunState) -> dict[str, Any]:
    """What a write of ``state`` would leave in ``step_runs``: copies of the records
    ``state.changed`` names; clears ``changed`` as the write does."""
    stored = {sid: copy.deepcopy(state.steps[sid]) for sid in state.changed}
    state.changed.clear()
    return stored


@pytest.mark.parametrize("n", [0, 5])
@pytest.mark.parametrize("allowed", range(0, 12))
def test_steps_left_ready_are_written_by_the_advance_that_evaluates_them(
    n: int, allowed: int
) -> None:
    """The inline steps a yielding start left ready, evaluated by a later advance, are
    among the records that advance writes: none stays ``ready`` in the stored rows of a
    run that succeeded."""
    graph = _graph()
    calls = 0

    def should_yield() -> bool:
        nonlocal calls
        calls += 1
        return calls > allowed

    state = _state(n)
    orchestrator.start(graph, state, NOW, should_yield=should_yield)
    rows = _stored(state)  # the start's write
    orchestrator.advance(graph, state, NOW)  # a worker continues the run
    rows.update(_stored(state))
    state.steps["act"].move(StepStatus.RUNNING)
    orchestrator.complete_action(graph, state, "act", {"done": True}, NOW)
    rows.update(_stored(state))

    assert state.status == RunStatus.SUCCEEDED
    assert {sid: rec.status for sid, rec in rows.items()} == {
        sid: rec.status for sid, rec in state.steps.items()
    }
