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
  leases expire and other workers run them.

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
import signal
import socket
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
from tests.integration.railyard_processes import processes, until
from tests.integration.trigger_faults import (
    assert_exactly_once,
    run_start_waiting,
    runs_locked,
    until_every_event_has_a_run,
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

FLOW_LIMIT = 120.0
"""Seconds any one phase (a share of the runs stored, the publishing, the last runs
ending) may take on a loaded machine."""


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


def _kill(proc: Any) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(5)


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
            _kill(stage.procs["events"])  # mid-stream: messages handed to it are not acked
            events = stage.start("events", "events-2")
            await _until_runs(runtime, wf_id, stored + 20, "events-2 to store runs")
            async with runs_locked(runtime):
                await until(lambda: run_start_waiting(runtime), 60, "a run start in flight")
                _kill(events)  # its events are stored, their runs are not
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


async def test_worker_killed_mid_run(
    case: BrokerCase, runtime: Runtime, staged: Any, sink: HttpSink
) -> None:
    sink.delay = 0.3
    async with staged(functools.partial(_calling_flow, case, url=sink.url), 1) as stage:
        wf_id, pub = stage.workflow_id, stage.pub
        first = stage.procs["worker-1"]
        worker = f"{socket.gethostname()}:{first.pid}"
        async with _publishing(pub) as sending:
            await _until_runs(runtime, wf_id, COUNT // 4, "a quarter of the runs")

            async def calling() -> bool:
                running = await _scalar(
                    runtime,
                    "select count(*) from attempts where worker = :worker"
                    " and status = 'running' and step_id = 'call'",
                    worker=worker,
                )
                return int(running) > 0

            await until(calling, 60, "worker-1 to have calls in flight")
            _kill(first)  # mid-run: its attempts' leases expire, then others run them
            stage.start("worker", "worker-2")
            await _every_message_once(runtime, wf_id, pub, sending)
    rows = await _call_attempts(runtime, wf_id)
    assert any(status == "expired" and who == worker for _, status, who in rows), (
        "an attempt of the killed worker expired"
    )
    succeeded = sorted(run for run, status, _ in rows if status == "succeeded")
    assert len(succeeded) == COUNT and len(set(succeeded)) == COUNT, (
        "each run's call step completed exactly once"
    )
    # the endpoint is called at least once per run (again when a kill cut a call off)
    assert len(sink.requests) >= COUNT


async def _call_attempts(runtime: Runtime, workflow_id: str) -> list[tuple[str, str, str]]:
    """``(run id, status, worker)`` of every attempt of the runs' ``call`` step."""
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select a.run_id::text, a.status, a.worker from attempts a"
                " join runs r on r.id = a.run_id"
                " where r.workflow_id = :w and a.step_id = 'call'"
            ),
            {"w": workflow_id},
        )
        return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]
