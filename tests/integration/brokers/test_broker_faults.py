"""Exactly one run per broker message with real processes and real brokers under faults
(issue 26), for Redis Streams, RabbitMQ, Mosquitto (MQTT) and NATS JetStream.

Each test publishes a workflow ``<broker> message received -> ...``, runs real
``railyard scheduler``, ``worker`` and ``events`` processes (railyard_processes.py:
attempt lease 3 s, sweep every 0.5 s, subscription lease 3 s) against the session's
PostgreSQL and Redis and the broker servers of tests/broker_servers.py, publishes
:data:`COUNT` messages with ids of their own at a steady pace (faults.py: every message
confirmed by the broker, published again after a failed connection) and, while they
flow:

- kills the events process (SIGKILL) and starts another, twice: once mid-stream, once
  with a run start in flight (the ``runs`` table locked until it waits on it, so its
  events are stored and their runs are not: the scheduler's sweep starts them); the
  new process takes the subscription over once the lease runs out;
- restarts the broker (same port and data): the events process, left alone, opens the
  subscription again by itself;
- kills a worker with steps in flight (an HTTP call to a slow endpoint): their attempts'
  leases expire and other workers run them;
- (Redis Streams) kills the scheduler leader while its sweep starts the runs of events a
  killed events process stored but did not start: the standby takes over and starts them.

Then every message id has exactly one inbox row and exactly one run, every run
succeeded, and nothing else started a run (trigger_faults.py,
:func:`assert_exactly_once`). Bounded: a few hundred messages, every wait with a limit;
the tests assert no timing. They run in their broker's xdist group, so one pytest
worker holds each broker and its tests never compete with each other for the CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.brokers.cases import BrokerCase, fresh_name
from tests.integration.brokers.faults import Publisher, publisher, restart_broker
from tests.integration.flows import publish
from tests.integration.railyard_processes import leader_pid, processes, until
from tests.integration.trigger_faults import (
    assert_calls_once_after_kill,
    assert_exactly_once,
    calls_in_flight,
    kill,
    run_start_waiters,
    run_start_waiting,
    runs_locked,
    until_every_event_has_a_run,
    worker_name,
)

pytestmark = [pytest.mark.integration, pytest.mark.brokers, pytest.mark.faults]

CASES = [
    pytest.param(name, marks=pytest.mark.xdist_group(name), id=name)
    for name in ("redis", "amqp", "mqtt", "nats")
]

COUNT = 300
"""Messages per test."""

PACE = 0.04
"""Seconds between two publishes (about 12 s of publishing)."""

SUBSCRIPTION_LEASE = "3"
"""``RAILYARD_SUBSCRIPTION_LEASE_SECONDS`` of the processes: a restarted events process
takes the subscription over within 3 s."""

FLOW_LIMIT = 240.0
"""Seconds any one phase (a share of the runs stored, the publishing, the last runs
ending) may take on a loaded machine: MQTT stores one message at a time, and with a
worker killed and the suite's other groups running its 300 runs once took over 120 s."""


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> BrokerCase:
    return request.getfixturevalue(f"{request.param}_case")  # type: ignore[no-any-return]


def _trigger(case: BrokerCase, name: str) -> dict[str, Any]:
    """The trigger node over ``name``, storing 8 messages at once where the trigger can
    (not MQTT's, which keeps the broker's order)."""
    config = case.config(name)
    if case.label != "mqtt":
        config["concurrency"] = 8
    if case.label == "nats":
        config["ack_wait"] = 2
    return node("event", case.trigger.type, **config)


def _flow(case: BrokerCase, name: str) -> dict[str, Any]:
    """trigger -> Set."""
    return diagram(
        [_trigger(case, name), node("note", "control.set", mapping={"seen": "=message_id"})],
        [edge("event", "note")],
    )


def _calling_flow(case: BrokerCase, name: str, *, url: str) -> dict[str, Any]:
    """trigger -> HTTP POST ``url`` (a slow API) -> Set."""
    return diagram(
        [
            _trigger(case, name),
            node("call", "http.request", method="POST", url=url, body="=payload"),
            node("after", "control.set", mapping={"status": "=status"}),
        ],
        [edge("event", "call"), edge("call", "after")],
    )


async def _scalar(runtime: Runtime, sql: str, **params: Any) -> Any:
    async with runtime.engine.connect() as conn:
        return (await conn.execute(text(sql), params)).scalar_one()


async def _runs(runtime: Runtime, workflow_id: str, status: str | None = None) -> int:
    sql = "select count(*) from runs where workflow_id = :w"
    if status is not None:
        sql += " and status = :s"
    return int(await _scalar(runtime, sql, w=workflow_id, s=status))


async def _until_runs(runtime: Runtime, workflow_id: str, n: int, what: str) -> None:
    async def enough() -> bool:
        return await _runs(runtime, workflow_id) >= n

    await until(enough, FLOW_LIMIT, what)


async def _until_mid_stream(
    runtime: Runtime, workflow_id: str, pub: Publisher, published: int, what: str
) -> None:
    """Until ``published`` messages are published and runs are being stored, asserting
    that publishing goes on (not all :data:`COUNT` messages are out yet)."""

    async def flowing() -> bool:
        return pub.published >= published and await _runs(runtime, workflow_id) > 0

    await until(flowing, FLOW_LIMIT, what)
    assert pub.published < COUNT, f"{what}: all messages were published already"


async def _until_held(runtime: Runtime, workflow_id: str) -> None:
    """Until an events process holds the workflow's subscription."""

    async def held() -> bool:
        owner = await _scalar(
            runtime,
            "select lease_owner from trigger_subscriptions where workflow_id = :w",
            w=workflow_id,
        )
        return owner is not None

    await until(held, 60, "an events process to hold the subscription")


@contextlib.asynccontextmanager
async def _publishing(pub: Publisher) -> AsyncIterator[asyncio.Task[None]]:
    """Publish :data:`COUNT` messages in the background while inside."""
    task = asyncio.create_task(pub.run(COUNT, PACE))
    try:
        yield task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _every_message_once(
    runtime: Runtime, workflow_id: str, pub: Publisher, sending: asyncio.Task[None]
) -> list[str]:
    """Wait for the last publish, every message's run and every run's end; then check
    exactly one inbox row and one succeeded run per message id. The ids."""
    await asyncio.wait_for(sending, FLOW_LIMIT)
    expected = [pub.event_id(n) for n in range(COUNT)]
    # a stored event whose run a killed process did not start waits for the sweep (10 s)
    await until_every_event_has_a_run(runtime, workflow_id, expected, FLOW_LIMIT)

    async def ended() -> bool:
        return await _runs(runtime, workflow_id, "succeeded") >= COUNT

    await until(ended, FLOW_LIMIT, "every run to succeed")
    await assert_exactly_once(runtime, workflow_id, expected, lambda run: run["message_id"])
    return expected


@dataclass
class Stage:
    """A test's running scene: the workflow, the publisher (not started), ``start`` of
    railyard_processes.py, and the processes started so far by name."""

    workflow_id: str
    pub: Publisher
    start: Any
    procs: dict[str, Any]


@contextlib.asynccontextmanager
async def _stage(
    case: BrokerCase,
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    directory: Path,
    flow: Any,
    workers: int = 2,
) -> AsyncIterator[Stage]:
    """Publish ``flow(name)`` over a fresh subject name the broker keeps messages for,
    start a scheduler, ``workers`` workers and an events process (subscription lease
    :data:`SUBSCRIPTION_LEASE`), and wait until that process holds the subscription."""
    name = fresh_name("flt")
    await case.prepare(name)
    wf = await publish(client, flow(name))
    env = {"RAILYARD_SUBSCRIPTION_LEASE_SECONDS": SUBSCRIPTION_LEASE}
    with processes(settings, directory, **env) as start:
        procs = {"scheduler": start("scheduler")}
        for n in range(1, workers + 1):
            procs[f"worker-{n}"] = start("worker", f"worker-{n}")
        procs["events"] = start("events", "events")
        await _until_held(runtime, wf["id"])
        yield Stage(wf["id"], publisher(case, name), start, procs)


@pytest.fixture
def staged(
    case: BrokerCase,
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    embedded_tmp_dir: Path,
) -> Any:
    """``staged(flow, workers=2)``: :func:`_stage` for this test's broker and servers."""
    return functools.partial(_stage, case, client, runtime, settings, embedded_tmp_dir)


async def test_events_process_killed_mid_stream(
    case: BrokerCase, runtime: Runtime, staged: Any
) -> None:
    async with staged(functools.partial(_flow, case)) as stage:
        wf_id, pub = stage.workflow_id, stage.pub
        async with _publishing(pub) as sending:
            await _until_mid_stream(runtime, wf_id, pub, COUNT // 5, "a fifth published")
            stored = await _runs(runtime, wf_id)
            kill(stage.procs["events"])  # mid-stream: messages handed to it are not acked
            events = stage.start("events", "events-2")
            await _until_runs(runtime, wf_id, stored + 20, "events-2 to store runs")
            async with runs_locked(runtime):
                await until(lambda: run_start_waiting(runtime), 60, "a run start in flight")
                kill(events)  # its events are stored, their runs are not
            stage.start("events", "events-3")
            await _every_message_once(runtime, wf_id, pub, sending)


async def test_broker_restarted_mid_stream(
    case: BrokerCase, runtime: Runtime, staged: Any, embedded_tmp_dir: Path
) -> None:
    async with staged(functools.partial(_flow, case)) as stage:
        wf_id, pub = stage.workflow_id, stage.pub
        async with _publishing(pub) as sending:
            await _until_mid_stream(runtime, wf_id, pub, COUNT // 4, "a quarter published")
            await asyncio.to_thread(restart_broker, case)
            await _every_message_once(runtime, wf_id, pub, sending)
        events = stage.procs["events"]
        assert events.poll() is None, "the events process reconnected, it was not restarted"
    log = (embedded_tmp_dir / "events.log").read_text(errors="replace")
    assert "ended" in log, "the subscription saw the broker go away"


@pytest.mark.xdist_group("redis")
async def test_scheduler_leader_killed_while_sweeping_redis_streams(
    redis_case: BrokerCase,
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    embedded_tmp_dir: Path,
) -> None:
    """Redis Streams: the events process is killed with a run start in flight, so its
    stored events have no run; the scheduler leader's sweep starts them and is killed
    with its own run start in flight; the standby takes over and its sweep starts them."""
    case = redis_case
    flow = functools.partial(_flow, case)
    async with _stage(case, client, runtime, settings, embedded_tmp_dir, flow) as stage:
        wf_id, pub = stage.workflow_id, stage.pub
        await until(lambda: _leads(runtime), 30, "the scheduler to lead")
        stage.start("scheduler", "scheduler-2")  # the standby
        leader = stage.procs["scheduler"]
        async with _publishing(pub) as sending:
            await _until_mid_stream(runtime, wf_id, pub, COUNT // 5, "a fifth published")
            async with runs_locked(runtime):
                await until(lambda: run_start_waiting(runtime), 60, "a run start in flight")
                events = await run_start_waiters(runtime)
                kill(stage.procs["events"])  # its events are stored, their runs are not

                async def sweeping() -> bool:  # the leader's sweep waits on the lock
                    return bool(await run_start_waiters(runtime) - events)

                await until(sweeping, 60, "the leader's sweep to start runs")
                old = await leader_pid(runtime)
                kill(leader)
            stage.start("events", "events-2")

            async def taken_over() -> bool:
                pid = await leader_pid(runtime)
                return pid is not None and pid != old

            await until(taken_over, 60, "the standby to lead")
            await _every_message_once(runtime, wf_id, pub, sending)


async def _leads(runtime: Runtime) -> bool:
    return await leader_pid(runtime) is not None


async def test_worker_killed_mid_run(
    case: BrokerCase, runtime: Runtime, staged: Any, sink: HttpSink
) -> None:
    sink.delay = 0.3
    async with staged(functools.partial(_calling_flow, case, url=sink.url), 1) as stage:
        wf_id, pub = stage.workflow_id, stage.pub
        first = stage.procs["worker-1"]
        worker = worker_name(first)
        async with _publishing(pub) as sending:
            await _until_runs(runtime, wf_id, COUNT // 4, "a quarter of the runs")
            await until(
                lambda: calls_in_flight(runtime, worker), 60, "worker-1 to have calls in flight"
            )
            kill(first)  # mid-run: its attempts' leases expire, then others run them
            stage.start("worker", "worker-2")
            await _every_message_once(runtime, wf_id, pub, sending)
    await assert_calls_once_after_kill(runtime, wf_id, worker, COUNT)
    # the endpoint is called at least once per run (again when a kill cut a call off)
    assert len(sink.requests) >= COUNT
