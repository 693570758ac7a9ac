"""Eager execution (backend/services/runs/execution/eager.py): a webhook that waits for its
run's answer runs the run's steps in the API process itself, within the process's budget,
and a run whose eager process stops or dies is finished by a worker, each step completing
once. Real PostgreSQL, Redis, workers and, for the kill, a ``railyard api`` subprocess."""

from __future__ import annotations

import asyncio
import signal
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from arq.constants import default_queue_name
from sqlalchemy import select, text

from backend.db.models import WorkflowVersion
from backend.engine import expressions
from backend.runtime import Runtime, build_runtime
from backend.services.runs.recovery import sweep
from backend.settings import Settings
from backend.workers.run_control import eager_control
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink, Recorded
from tests.integration.conftest import wait_for_run
from tests.integration.fake_clock import FakeClock
from tests.integration.flows import attempt_rows, event_kinds, publish, step_attempts
from tests.integration.railyard_processes import processes, until

pytestmark = pytest.mark.integration


def three_templates(wait_timeout: float = 30) -> dict[str, Any]:
    """Webhook answering with the last step's output -> three Text template steps."""
    return diagram(
        [
            node("hook", "trigger.webhook", respond="last_step", wait_timeout=wait_timeout),
            node("s1", "data.template", template="run{{ input.body.id }} step1"),
            node("s2", "data.template", template="{{ input.text }} step2"),
            node("s3", "data.template", template="{{ input.text }} step3"),
        ],
        [edge("hook", "s1"), edge("s1", "s2"), edge("s2", "s3")],
    )


def slow_call(url: str, wait_timeout: float = 60) -> dict[str, Any]:
    """Webhook answering with the last step's output -> HTTP POST ``url`` -> Set."""
    return diagram(
        [
            node("hook", "trigger.webhook", respond="last_step", wait_timeout=wait_timeout),
            node("call", "http.request", method="POST", url=url, body="=body"),
            node("after", "control.set", mapping={"status": "=status"}),
        ],
        [edge("hook", "call"), edge("call", "after")],
    )


async def write_transactions(runtime: Runtime) -> int:
    """The database's next transaction id (each call uses one itself)."""
    async with runtime.engine.begin() as conn:
        return int((await conn.execute(text("select txid_current()"))).scalar_one())


async def call_attempts(runtime: Runtime, run_id: str) -> list[tuple[Any, ...]]:
    """``(number, status, error kind, worker)`` of the ``call`` step's attempts."""
    return await step_attempts(runtime, run_id, "call")


async def succeeded_events(runtime: Runtime, run_id: str, step_id: str) -> int:
    """How many ``step.succeeded`` events step ``step_id`` of run ``run_id`` has."""
    return (await event_kinds(runtime, run_id, step_id)).count("step.succeeded")


async def webhook_run_id(runtime: Runtime) -> str:
    """The id of the only webhook run."""
    async with runtime.engine.connect() as conn:
        return str(
            (await conn.execute(text("select id from runs where trigger = 'webhook'"))).scalar_one()
        )


async def published_version(
    client: httpx.AsyncClient, runtime: Runtime, d: dict[str, Any]
) -> WorkflowVersion:
    """Publish diagram ``d``; its workflow version (what a start is handed)."""
    wf = await publish(client, d)
    async with runtime.sessionmaker() as session:
        return (
            await session.execute(
                select(WorkflowVersion).where(WorkflowVersion.workflow_id == uuid.UUID(wf["id"]))
            )
        ).scalar_one()


def called(sink: HttpSink, times: int = 1) -> Any:
    async def predicate() -> bool:
        return len(sink.requests) >= times

    return predicate


async def test_eager_run_answers_with_its_last_step_output_in_four_transactions(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """No worker runs: the API process runs the three steps itself, and the run costs 4
    write transactions (the start with the first claim, three completions)."""
    wf = await publish(client, three_templates())
    warm = await client.post(wf["webhook_path"], json={"id": 0})  # caches graph and settings
    assert (warm.status_code, warm.json()) == (200, {"text": "run0 step1 step2 step3"})
    transitions = runtime.execution.writer
    locked = []
    real_locked = transitions.locked

    async def counting(*args: Any, **kwargs: Any) -> Any:
        locked.append(args)
        return await real_locked(*args, **kwargs)

    transitions.locked = counting  # type: ignore[method-assign]
    before = await write_transactions(runtime)
    r = await client.post(wf["webhook_path"], json={"id": 7})
    after = await write_transactions(runtime)
    transitions.locked = real_locked  # type: ignore[method-assign]
    assert locked == []  # every completion took the fenced one-statement path
    assert (r.status_code, r.json()) == (200, {"text": "run7 step1 step2 step3"})
    assert after - before - 1 == 4
    assert await runtime.redis.zcard(default_queue_name) == 0  # nothing went to a queue
    async with runtime.engine.connect() as conn:
        workers = (await conn.execute(text("select distinct worker from attempts"))).scalars().all()
    assert workers == [runtime.execution.env.worker]
    assert runtime.execution.eager.running() == 0


async def test_eager_budget_full_queues_the_step_for_a_worker(
    client: httpx.AsyncClient, runtime: Runtime, worker_factory: Any
) -> None:
    wf = await publish(client, three_templates(wait_timeout=0.5))
    assert runtime.execution.eager.reserve()  # the budget of 1 is taken ...
    runtime.execution.eager.limit = 1
    try:
        r = await client.post(wf["webhook_path"], json={"id": 1})
        assert r.status_code == 202, r.text  # ... so no worker, no answer in time
        run_id = r.json()["run_id"]
        assert await runtime.redis.zcard(default_queue_name) == 1  # queued instead
        assert await attempt_rows(runtime, run_id) == []
    finally:
        runtime.execution.eager.release()
    async with worker_factory():
        assert await wait_for_run(runtime, run_id) == "succeeded"
    async with runtime.engine.connect() as conn:
        output = (
            await conn.execute(text("select output from runs where id = :id"), {"id": run_id})
        ).scalar_one()
    assert output == {"text": "run1 step1 step2 step3"}


async def test_api_shutdown_mid_eager_step_hands_the_attempt_back_to_a_worker(
    client: httpx.AsyncClient, runtime: Runtime, worker_factory: Any, sink: HttpSink
) -> None:
    def first_call_slow(_: Recorded, number: int) -> tuple[int, Any]:
        sink.delay = 8.0 if number == 1 else 0.0  # the first call outlasts the grace
        return 200, {"ok": True}

    sink.handler = first_call_slow
    wf = await publish(client, slow_call(sink.url))
    answer = asyncio.create_task(client.post(wf["webhook_path"], json={"order": 1}))
    await until(called(sink), 30, "the API to call the endpoint")
    run_id = await webhook_run_id(runtime)
    stopped = await runtime.execution.eager.stop(grace_seconds=0.2)  # the API stops
    assert stopped == []  # handed back, not cancelled
    assert runtime.execution.eager.reserve() is False  # no eager run while draining
    assert await call_attempts(runtime, run_id) == [
        (1, "released", "worker_shutdown", runtime.execution.env.worker)
    ]
    async with worker_factory():
        r = await asyncio.wait_for(answer, 30)  # the waiting request gets its answer
        assert await wait_for_run(runtime, run_id) == "succeeded"
    assert (r.status_code, r.json()) == (200, {"status": 200})
    assert [row[:3] for row in await call_attempts(runtime, run_id)] == [
        (1, "released", "worker_shutdown"),
        (2, "succeeded", None),
    ]
    assert await succeeded_events(runtime, run_id, "call") == 1
    assert await succeeded_events(runtime, run_id, "after") == 1
    assert {rec.headers["idempotency-key"] for rec in sink.requests} == {f"{run_id}:call"}


async def test_eager_run_dead_right_after_its_start_is_recovered_without_a_retry(
    client: httpx.AsyncClient, runtime: Runtime, worker_factory: Any
) -> None:
    """The process dies between the start's commit and running the step: the start
    claimed the step for it, so the lease runs out, the sweeper reopens the step (no retry
    used) and a worker runs it."""
    version = await published_version(client, runtime, three_templates())
    execution = runtime.execution
    started = await execution.starts.start_run(
        version, {"body": {"id": 3}}, trigger="webhook", eager=True
    )
    assert started.eager is not None and started.eager.step_id == "s1"
    execution.eager.release()  # the process "died": nothing runs the step
    run_id = str(started.run_id)
    real = execution.clock
    clock = FakeClock(real.now())
    clock.advance(runtime.settings.lease_seconds + 1)
    execution.clock = clock
    try:
        counts = await sweep(execution.recovery, grace_seconds=0)
    finally:
        execution.clock = real
    assert counts["expired"] == 1
    async with worker_factory():
        assert await wait_for_run(runtime, run_id) == "succeeded"
    rows = [row for row in await attempt_rows(runtime, run_id) if row[0] == "s1"]
    assert [row[1:3] for row in rows] == [(1, "expired"), (2, "succeeded")]
    assert await succeeded_events(runtime, run_id, "s1") == 1


@pytest.fixture
async def other_process(settings: Settings) -> AsyncIterator[Runtime]:
    """A second runtime, standing for another API process (its cancels go through Redis)."""
    rt = await build_runtime(settings, pool_size=2)
    try:
        yield rt
    finally:
        await rt.close()


async def test_eager_run_cancelled_while_its_step_runs_stops_the_step(
    client: httpx.AsyncClient, runtime: Runtime, sink: HttpSink, other_process: Runtime
) -> None:
    sink.delay = 20.0  # the call would hold the eager run this long if it were not stopped
    wf = await publish(client, slow_call(sink.url))
    execution = runtime.execution
    async with eager_control(runtime.redis, execution, grace_seconds=0):
        answer = asyncio.create_task(client.post(wf["webhook_path"], json={"order": 2}))
        await until(called(sink), 30, "the API to call the endpoint")
        run_id = await webhook_run_id(runtime)
        assert execution.eager.running() == 1
        assert await other_process.execution.cancel_run(uuid.UUID(run_id), "stop it")

        async def stopped() -> bool:
            return execution.eager.running() == 0

        await until(stopped, 10, "the eager run to stop (the call takes 20 s)")
        r = await asyncio.wait_for(answer, 10)
    assert r.status_code == 500
    assert r.json()["status"] == "cancelled"
    assert [row[:2] for row in await call_attempts(runtime, run_id)] == [(1, "cancelled")]


async def test_api_killed_mid_eager_step_the_run_completes_on_a_worker(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    sink: HttpSink,
    embedded_tmp_dir: Path,
) -> None:
    def first_call_slow(_: Recorded, number: int) -> tuple[int, Any]:
        sink.delay = 30.0 if number == 1 else 0.0
        return 200, {"ok": True}

    sink.handler = first_call_slow
    wf = await publish(client, slow_call(sink.url))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with processes(settings, embedded_tmp_dir) as start:  # lease 3 s, sweep every 0.5 s
        api = start("api", "api", "--port", str(port))
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:

            async def ready() -> bool:
                try:
                    return (await http.get("/health/ready")).status_code == 200
                except httpx.TransportError:
                    return False

            await until(ready, 30, "the API to be ready")
            request = asyncio.create_task(http.post(wf["webhook_path"], json={"order": 3}))
            await until(called(sink), 30, "the API to call the endpoint")
            api.send_signal(signal.SIGKILL)  # in the middle of the eager step
            api.wait(5)
            with pytest.raises(httpx.TransportError):
                await request
        run_id = await webhook_run_id(runtime)
        start("scheduler")
        start("worker")
        assert await wait_for_run(runtime, run_id, timeout=40) == "succeeded"
    host = socket.gethostname()
    rows = await call_attempts(runtime, run_id)
    assert rows[0] == (1, "expired", "lease_expired", f"{host}:{api.pid}")
    assert [row[:3] for row in rows[1:]] == [(2, "succeeded", None)]
    assert await succeeded_events(runtime, run_id, "call") == 1
    assert await succeeded_events(runtime, run_id, "after") == 1
    assert {rec.headers["idempotency-key"] for rec in sink.requests} == {f"{run_id}:call"}


def refused_at(step: int, url: str) -> dict[str, Any]:
    """Webhook answering with the last step's output -> two action steps, the
    ``step``-th (1 or 2) an HTTP POST to ``url`` whose body is a NUL character."""
    refused = node("call", "http.request", method="POST", url=url, body='=$base64decode("AA==")')
    fine = node("text", "data.template", template="fine")
    first, second = (refused, fine) if step == 1 else (fine, refused)
    return diagram(
        [
            node(
                "hook",
                "trigger.webhook",
                respond="last_step",
                wait_timeout=20,
                failure_answer="detailed",
            ),
            first,
            second,
        ],
        [edge("hook", first["id"]), edge(first["id"], second["id"])],
    )


@pytest.mark.parametrize("step", [1, 2])
async def test_a_value_the_database_refuses_fails_an_eager_run_once(
    client: httpx.AsyncClient,
    runtime: Runtime,
    worker_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    sink: HttpSink,
    step: int,
) -> None:
    """Should a config value PostgreSQL refuses still reach it (the engine's check is
    switched off here): refused in the start's claim, the run starts without it and the
    worker fails it; refused in a later claim of the eager run, the eager run fails it.
    Either way the webhook answers 500 naming the error, never a 500 of its own."""
    monkeypatch.setattr(expressions, "storable_problem", lambda value, path: None)
    wf = await publish(client, refused_at(step, sink.url))
    async with worker_factory():
        r = await client.post(wf["webhook_path"], json={})
    assert r.status_code == 500, r.text
    body = r.json()
    assert body["status"] == "failed", body
    assert body["error"]["kind"] == "unstorable_value", body
    assert sink.requests == []  # the refused step never ran


async def stored_claim(runtime: Runtime, run_id: str) -> dict[str, Any]:
    """What a run's start and its first claim stored, without ids and times: the step
    records, the attempts and the event kinds."""
    async with runtime.engine.connect() as conn:
        steps = await conn.execute(
            text(
                "select step_id, status, input, attempts from step_runs"
                " where run_id = :id order by step_id"
            ),
            {"id": run_id},
        )
        attempts = await conn.execute(
            text(
                "select step_id, number, status, worker, input, config from attempts"
                " where run_id = :id"
            ),
            {"id": run_id},
        )
        events = await conn.execute(
            text("select kind, step_id from events where run_id = :id order by id"),
            {"id": run_id},
        )
        return {
            "steps": [tuple(r) for r in steps],
            "attempts": [tuple(r) for r in attempts],
            "events": [tuple(r) for r in events],
        }


async def test_the_claim_in_the_start_stores_what_a_workers_claim_stores(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """The eager start claims its first step with the worker's own claim function: the
    run it stores in one statement equals a run started as usual and then claimed."""
    version = await published_version(client, runtime, three_templates())
    execution = runtime.execution
    run_input = {"body": {"id": 5}}
    eager = await execution.starts.start_run(version, run_input, trigger="webhook", eager=True)
    assert eager.eager is not None
    execution.eager.release()
    usual = await execution.starts.start_run(version, run_input, trigger="webhook")
    assert usual.eager is None
    claimed = await execution.steps.claim(usual.run_id, "s1")
    assert claimed is not None
    assert await stored_claim(runtime, str(eager.run_id)) == await stored_claim(
        runtime, str(usual.run_id)
    )
    assert (eager.eager.number, eager.eager.config) == (claimed.number, claimed.config)


async def subscribes(runtime: Runtime) -> int:
    """SUBSCRIBE commands Redis has served so far (``INFO commandstats``)."""
    stats = await runtime.redis.info("commandstats")
    return int(stats.get("cmdstat_subscribe", {}).get("calls", 0))


async def test_eager_run_ending_here_answers_without_a_redis_subscription(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """The webhook hears of a run this process executes from the process itself: no
    SUBSCRIBE (nor UNSUBSCRIBE) of the run's channel on Redis."""
    wf = await publish(client, three_templates())
    warm = await client.post(wf["webhook_path"], json={"id": 0})
    assert warm.status_code == 200, warm.text
    before = await subscribes(runtime)
    r = await client.post(wf["webhook_path"], json={"id": 8})
    assert (r.status_code, r.json()) == (200, {"text": "run8 step1 step2 step3"})
    assert await subscribes(runtime) == before
    assert await runtime.redis.pubsub_channels("railyard:run:*") == []


async def test_eager_run_leaving_the_process_is_answered_through_redis(
    client: httpx.AsyncClient, runtime: Runtime, worker_factory: Any
) -> None:
    """A run whose first step runs here and whose timer then hands it to a worker: once
    its eager task ends, the waiting webhook subscribes to the run's channel on Redis and
    reads it, and answers with what the worker finished."""
    d = diagram(
        [
            node("hook", "trigger.webhook", respond="last_step", wait_timeout=60),
            node("s1", "data.template", template="run{{ input.body.id }} step1"),
            node("nap", "control.delay", seconds=1),
            node("s2", "data.template", template="{{ input.text }} step2"),
        ],
        [edge("hook", "s1"), edge("s1", "nap"), edge("nap", "s2")],
    )
    wf = await publish(client, d)
    before = await subscribes(runtime)
    answer = asyncio.create_task(client.post(wf["webhook_path"], json={"id": 9}))
    for _ in range(1000):  # no worker runs yet: s1 runs here, then the run waits
        if await runtime.redis.pubsub_channels("railyard:run:*"):
            break
        await asyncio.sleep(0.01)
    run_id = await webhook_run_id(runtime)
    assert await succeeded_events(runtime, run_id, "s1") == 1
    assert runtime.execution.eager.running() == 0  # the eager task ended ...
    assert await subscribes(runtime) == before + 1  # ... and the webhook subscribed
    async with worker_factory():
        r = await asyncio.wait_for(answer, 60)
    assert (r.status_code, r.json()) == (200, {"text": "run9 step1 step2"})


async def test_start_not_run_here_subscribes_after_the_insert_and_reads(
    client: httpx.AsyncClient, runtime: Runtime, worker_factory: Any
) -> None:
    """The budget had room when the webhook began listening, but the start found it full
    (another start took the place): the run goes to a worker, and the webhook, listening
    only to this process until then, subscribes on Redis, reads the run and answers."""
    wf = await publish(client, three_templates())
    runtime.execution.eager.limit = 1
    real_reserve = runtime.execution.eager.reserve
    runtime.execution.eager.reserve = lambda: False  # type: ignore[method-assign]
    before = await subscribes(runtime)
    try:
        answer = asyncio.create_task(client.post(wf["webhook_path"], json={"id": 3}))
        for _ in range(400):  # queued for a worker (none runs yet), the webhook listening
            if await runtime.redis.pubsub_channels("railyard:run:*"):
                break
            await asyncio.sleep(0.01)
        assert await runtime.redis.zcard(default_queue_name) == 1
        assert await subscribes(runtime) == before + 1
        async with worker_factory():
            r = await asyncio.wait_for(answer, 60)
    finally:
        runtime.execution.eager.reserve = real_reserve  # type: ignore[method-assign]
    assert (r.status_code, r.json()) == (200, {"text": "run3 step1 step2 step3"})
