"""The execution use cases end to end on the in-memory run store (tests/fakes/run_store.py):
start, claim, run and complete action steps, retry, cancel and concurrency-limit admission,
with no database. tests/integration/test_run_store_contract.py checks the fake against the
PostgreSQL store."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

from backend.engine.ports import VersionRow
from backend.services.runs.execution import Execution
from tests.diagrams import diagram, edge, node
from tests.fakes.run_store import MemoryRunStore, as_port
from tests.unit.engine.driver import ActionFailed, compile_dict


class Dispatcher:
    """Records what the use cases send to workers (the arq dispatcher's port)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = []
        self.advances: list[str] = []
        self.notices: list[str] = []
        self.cancels: list[str] = []

    async def dispatch_step(self, run_id: str, step_id: str, *, delay: float | None = None) -> None:
        self.steps.append((str(run_id), step_id))

    async def dispatch_advance(self, run_id: str) -> None:
        self.advances.append(str(run_id))

    async def notify(self, run_id: str, notice: bytes = b"changed") -> None:
        self.notices.append(str(run_id))

    async def announce_cancel(self, run_id: str) -> None:
        self.cancels.append(str(run_id))


class Action:
    """``test.action``: answers ``{"done": <its config's name>, "input": <input>}``;
    fails (retryable) the first ``failures`` times it runs."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.calls: list[str] = []

    async def run(self, config: dict[str, Any], input: Any, context: Any) -> Any:
        self.calls.append(str(config.get("name")))
        if self.failures:
            self.failures -= 1
            raise ActionFailed("flaky", retryable=True)
        return {"done": config.get("name"), "input": input}


class Registry:
    def __init__(self, action: Action) -> None:
        self.runner = action

    def action(self, node_type: str, version: int = 1) -> Any:
        return self.runner if node_type == "test.action" else None


class Context:
    def __init__(self, is_cancelled: Any) -> None:
        self.is_cancelled = is_cancelled


def chain(retry: dict[str, Any] | None = None) -> dict[str, Any]:
    """start -> a -> b, two ``test.action`` steps (``retry``: a's retry policy)."""
    a = node("a", "test.action", name="a", **({"retry": retry} if retry else {}))
    return diagram(
        [node("start", "trigger.manual"), a, node("b", "test.action", name="b")],
        [edge("start", "a"), edge("a", "b")],
    )


class FixedClock:
    """One instant for every use case (runs written at it compare field by field)."""

    def now(self) -> datetime:
        return datetime(2026, 3, 1, 12, tzinfo=UTC)


def arrange(
    d: dict[str, Any],
    action: Action,
    settings: dict[str, Any] | None = None,
    *,
    clock: Any = None,
) -> tuple[MemoryRunStore, VersionRow, Execution, Dispatcher]:
    store = MemoryRunStore()
    version = store.add_workflow(compile_dict(d), settings=settings)
    dispatcher = Dispatcher()
    execution = Execution(
        as_port(store),
        dispatcher,
        Registry(action),
        lambda info, heartbeat, is_cancelled: Context(is_cancelled),
        lease_seconds=60,
        clock=clock,
    )
    return store, version, execution, dispatcher


async def work(execution: Execution, dispatcher: Dispatcher) -> None:
    """Run every dispatched step as a worker would, until none is left."""
    while dispatcher.steps:
        run_id, step_id = dispatcher.steps.pop(0)
        await execution.execute_step(uuid.UUID(run_id), step_id)


async def test_a_run_of_two_action_steps_succeeds() -> None:
    action = Action()
    store, version, execution, dispatcher = arrange(chain(), action)
    started = await execution.start_run(version, {"n": 1}, trigger="manual")
    assert started.created and started.status == "running"
    await work(execution, dispatcher)
    run = store.run(started.run_id)
    assert run.row.status == "succeeded"
    assert action.calls == ["a", "b"]
    assert run.steps["b"].output == {"done": "b", "input": {"done": "a", "input": {"n": 1}}}
    assert [a.status for a in store.attempts_of(started.run_id)] == ["succeeded", "succeeded"]
    assert store.events(started.run_id)[0] == "run.created"
    assert store.events(started.run_id)[-1] == "run.succeeded"


async def test_a_retried_step_succeeds_on_its_second_attempt() -> None:
    action = Action(failures=1)
    retry = {"max_attempts": 2, "initial_interval": 0, "max_interval": 0, "jitter": 0}
    store, version, execution, dispatcher = arrange(chain(retry), action)
    started = await execution.start_run(version, {"n": 1}, trigger="manual")
    await work(execution, dispatcher)
    run = store.run(started.run_id)
    assert run.row.status == "succeeded", run.steps
    assert action.calls == ["a", "a", "b"]
    assert [(a.start.step_id, a.status) for a in store.attempts_of(started.run_id)] == [
        ("a", "failed"),
        ("a", "succeeded"),
        ("b", "succeeded"),
    ]


async def test_an_idempotent_start_returns_the_first_run() -> None:
    store, version, execution, _ = arrange(chain(), Action())
    first = await execution.start_run(version, {}, trigger="api", idempotency_key="k-1")
    again = await execution.start_run(version, {}, trigger="api", idempotency_key="k-1")
    assert (again.run_id, again.created) == (first.run_id, False)
    assert len(store.tables.runs) == 1


async def test_a_cancelled_run_runs_no_more_steps() -> None:
    action = Action()
    store, version, execution, dispatcher = arrange(chain(), action)
    started = await execution.start_run(version, {}, trigger="manual")
    assert await execution.cancel_run(started.run_id, "not needed")
    await work(execution, dispatcher)
    assert store.run(started.run_id).row.status == "cancelled"
    assert action.calls == []


async def test_a_concurrency_limit_queues_the_second_run_until_the_first_ends() -> None:
    store, version, execution, dispatcher = arrange(
        chain(), Action(), settings={"max_concurrent_runs": 1}
    )
    first = await execution.start_run(version, {"n": 1}, trigger="manual")
    second = await execution.start_run(version, {"n": 2}, trigger="manual")
    assert (first.status, second.status) == ("running", "queued")
    await work(execution, dispatcher)
    assert store.run(first.run_id).row.status == "succeeded"
    for run_id in dispatcher.advances:  # the freed slot admits the queued run
        await execution.admit_queued(store.run(uuid.UUID(run_id)).row.workflow_id)
    await work(execution, dispatcher)
    assert store.run(second.run_id).row.status == "succeeded"


async def _stored_after_a_retried_run(fenced: bool) -> tuple[Any, int]:
    """A run of :func:`chain` whose first step fails once, executed by a run writer that
    may write fenced statements (``fenced``) or takes the lock for every change: the
    run as stored (its ids and its count of writes left out) and how many fenced
    statements were written."""
    retry = {"max_attempts": 2, "initial_interval": 0, "max_interval": 0, "jitter": 0}
    store, version, execution, dispatcher = arrange(chain(retry), Action(1), clock=FixedClock())
    execution.writer.fenced = fenced
    statements = []
    write_unlocked = store.write_unlocked

    async def counted(*args: Any, **kwargs: Any) -> Any:
        statements.append(args[0])
        return await write_unlocked(*args, **kwargs)

    store.write_unlocked = counted  # type: ignore[method-assign]
    started = await execution.start_run(version, {"n": 1}, trigger="manual")
    await work(execution, dispatcher)
    run = store.run(started.run_id)
    attempts = [(a.start.step_id, a.start.number, a.status) for a in store.attempts_of(run.row.id)]
    zero = uuid.UUID(int=0)  # ids each store draws
    row = dataclasses.replace(run.row, id=zero, workflow_id=zero, version_id=zero, revision=0)
    return (dataclasses.replace(run, row=row), attempts), len(statements)


async def test_the_run_writer_stores_the_same_run_fenced_and_locked() -> None:
    """Every decision of a run (start, claims, a failure retried, completions, the end)
    written by one fenced statement each, or each under the lock: the same stored run."""
    fenced, statements = await _stored_after_a_retried_run(True)
    locked, none = await _stored_after_a_retried_run(False)
    assert fenced == locked
    assert fenced[0].row.status == "succeeded"
    # the claim of a; its failure, retried at once by the same write; a and the claim of
    # b; b and the run's end (the start is the fenced insert, not counted here)
    assert (statements, none) == (4, 0)
