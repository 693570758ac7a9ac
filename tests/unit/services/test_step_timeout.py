"""Step timeout of an action: cooperative (is_cancelled) and then the task is cancelled."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from backend.engine.outcomes import AttemptFailed, AttemptSucceeded
from backend.services.runs.execution import Execution
from backend.services.runs.execution.steps import Claimed
from connectors.sdk import ActionInfo

INFO = ActionInfo("run-1", "wf-1", "step-1", 1, "run-1:step-1", "test.slow")


class SlowAction:
    """Sleeps in small steps; records what it saw when it was stopped."""

    def __init__(self) -> None:
        self.saw_cancel_flag = False
        self.task_cancelled = False
        self.started = asyncio.Event()

    async def run(self, config: dict[str, Any], input: Any, context: Any) -> Any:
        self.started.set()
        try:
            await asyncio.Event().wait()  # never set: only cancellation ends it
        except asyncio.CancelledError:
            self.task_cancelled = True
            self.saw_cancel_flag = context.is_cancelled()
            raise


class Registry:
    def __init__(self, action: Any) -> None:
        self._action = action

    def action(self, node_type: str, version: int = 1) -> Any:
        return self._action


class Context:
    def __init__(self, is_cancelled: Any) -> None:
        self.is_cancelled = is_cancelled


def execution(action: Any) -> Execution:
    return Execution(
        None,  # type: ignore[arg-type]  # no heartbeat within the test's lease: no store
        None,  # type: ignore[arg-type]
        Registry(action),
        lambda info, heartbeat, is_cancelled: Context(is_cancelled),
        lease_seconds=3600,
    )


def claimed(node_type: str, input: Any, timeout: float | None) -> Claimed:
    return Claimed(1, "t", 1, "run:step", input, {}, "step", node_type, timeout, "wf", uuid.uuid4())


async def test_timeout_sets_is_cancelled_then_cancels_the_task() -> None:
    action = SlowAction()
    outcome = await execution(action).steps.run_action(claimed("test.slow", None, 0.05), INFO)
    assert outcome == AttemptFailed(
        {"message": "step timed out after 0.05 s", "kind": "timeout"}, retryable=True
    )
    assert action.task_cancelled and action.saw_cancel_flag


async def test_no_timeout_returns_the_output() -> None:
    class Quick:
        async def run(self, config: dict[str, Any], input: Any, context: Any) -> Any:
            return {"echo": input}

    outcome = await execution(Quick()).steps.run_action(claimed("test.quick", 5, None), INFO)
    assert outcome == AttemptSucceeded({"echo": 5})


async def test_a_cancel_notice_for_the_run_stops_the_action_at_once() -> None:
    action = SlowAction()
    ex = execution(action)
    running = asyncio.ensure_future(ex.steps.run_action(claimed("test.slow", None, None), INFO))
    await asyncio.wait_for(action.started.wait(), 5)
    assert ex.cancel_watch.running_runs() == {"run-1"}
    assert ex.cancel_watch.cancel("other run") == 0
    assert ex.cancel_watch.cancel("run-1") == 1
    outcome = await asyncio.wait_for(running, 5)
    assert outcome == AttemptFailed({"message": "attempt cancelled", "kind": "cancelled"})
    assert action.task_cancelled and action.saw_cancel_flag
    assert ex.cancel_watch.running_runs() == set()  # unregistered when the attempt ended
