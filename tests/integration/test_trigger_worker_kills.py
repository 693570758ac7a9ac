"""Exactly one run per event, and exactly one completed call per run, with a worker
SIGKILLed mid-run (issue 26), for a polling trigger and an app-webhook trigger.

Each test publishes ``trigger -> HTTP POST (a slow API, 0.3 s an answer) -> Set``, runs
real ``railyard scheduler`` and ``worker`` processes (railyard_processes.py: attempt
lease 3 s, sweep every 0.5 s) against the session's PostgreSQL and Redis, lets events
arrive, kills the first worker (SIGKILL) while it has calls in flight and starts another:
the killed worker's attempts' leases expire and the new worker runs them again. Then
every event has exactly one inbox row and one succeeded run (trigger_faults.py,
:func:`assert_exactly_once`), an attempt of the killed worker expired, and each run's
call step succeeded exactly once.

- polling: ``http.new_items`` over a vendor whose items keep arriving (polled every
  second), the scheduler polling;
- app webhook: Slack's "message posted" (Events API, signed v0), its deliveries sent
  by the Slack emulator through the app, every fifth sent again with the same
  ``event_id`` as Slack retries.

Bounded: :data:`ITEMS` items, :data:`EVENTS` events, every wait with a limit; the tests
assert no timing.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.fakes.slack_events import SlackEvents
from tests.http_sink import HttpSink
from tests.integration.flows import publish
from tests.integration.railyard_processes import processes, until
from tests.integration.trigger_faults import (
    ItemsVendor,
    assert_calls_once_after_kill,
    assert_exactly_once,
    calls_in_flight,
    items_trigger,
    kill,
    poll_every_second,
    unfinished_runs,
    until_every_event_has_a_run,
    worker_name,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

ITEMS = 120
"""Items the polled vendor lists, one every 0.05 s."""

EVENTS = 100
"""Slack events delivered."""

FLOW_LIMIT = 240.0
"""Seconds any one phase (the items or deliveries, the last runs ending) may take on a
loaded machine (the Slack phase once passed 120 s in the full suite)."""

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def _calling_flow(trigger: dict[str, Any], url: str) -> dict[str, Any]:
    """``trigger`` -> HTTP POST ``url`` (the run's input as the body) -> Set."""
    return diagram(
        [
            trigger,
            node("call", "http.request", method="POST", url=url, body="=$"),
            node("after", "control.set", mapping={"status": "=status"}),
        ],
        [edge(trigger["id"], "call"), edge("call", "after")],
    )


async def _succeeded(runtime: Runtime, workflow_id: str) -> int:
    async with runtime.engine.connect() as conn:
        count = await conn.execute(
            text("select count(*) from runs where workflow_id = :w and status = 'succeeded'"),
            {"w": workflow_id},
        )
        return int(count.scalar_one())


async def _until_succeeded(runtime: Runtime, workflow_id: str, count: int, log_dir: Path) -> None:
    async def ended() -> bool:
        return await _succeeded(runtime, workflow_id) >= count

    try:
        await until(ended, FLOW_LIMIT, "every run to succeed")
    except AssertionError as timed_out:
        raise AssertionError(
            f"{timed_out}\n{await unfinished_runs(runtime, workflow_id, log_dir)}"
        ) from None


async def _kill_worker_mid_call(runtime: Runtime, start: Any) -> str:
    """Start worker-1, SIGKILL it once it has calls in flight, start worker-2; the
    killed worker's ``attempts.worker`` name."""
    first = start("worker", "worker-1")
    worker = worker_name(first)
    await until(lambda: calls_in_flight(runtime, worker), 60, "worker-1 to have calls in flight")
    kill(first)  # mid-run: its attempts' leases expire, then worker-2 runs them
    start("worker", "worker-2")
    return worker


async def test_polling_worker_killed_mid_run(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    embedded_tmp_dir: Path,
    sink: HttpSink,
) -> None:
    sink.delay = 0.3
    vendor = ItemsVendor(total=ITEMS, every=0.05).start()
    try:
        wf = await publish(client, _calling_flow(items_trigger(vendor), sink.url))
        await poll_every_second(runtime, wf["id"])
        with processes(settings, embedded_tmp_dir) as start:
            start("scheduler")
            killed = await _kill_worker_mid_call(runtime, start)

            async def listed() -> bool:
                return vendor.done

            await until(listed, 60, "the vendor's last item")
            expected = [item["id"] for item in vendor.items]
            await until_every_event_has_a_run(runtime, wf["id"], expected, FLOW_LIMIT)
            await _until_succeeded(runtime, wf["id"], ITEMS, embedded_tmp_dir)
    finally:
        vendor.stop()
    await assert_exactly_once(runtime, wf["id"], expected, lambda run: run["id"])
    await assert_calls_once_after_kill(runtime, wf["id"], killed, ITEMS)
    assert len(sink.requests) >= ITEMS  # again where a kill cut a call off


async def _slack_flow(client: httpx.AsyncClient, url: str) -> tuple[str, str]:
    """Publish ``Slack message posted -> call url -> Set``; the workflow id and the
    path of its app webhook (what the Trigger page shows)."""
    r = await client.post(
        "/api/credentials",
        json={"name": "slack", "type": "slack.app", "data": {"signing_secret": SIGNING_SECRET}},
    )
    assert r.status_code == 201, r.text
    trigger = node("t", "slack.message_posted", credential=r.json()["id"])
    wf_id = str((await publish(client, _calling_flow(trigger, url)))["id"])
    page = (await client.get(f"/workflows/{wf_id}/trigger")).text
    found = re.search(r"http://testserver\.local(/hooks/app/[A-Za-z0-9_-]+)", page)
    assert found, "the Trigger page shows no app webhook URL"
    return wf_id, found.group(1)


async def _deliver(slack: SlackEvents, url: str, count: int, lanes: int = 4) -> list[str]:
    """Deliver ``count`` messages over ``lanes`` connections, every fifth again with its
    ``event_id`` (Slack's retry); the event ids."""
    numbers = iter(range(count))
    ids: list[str] = []

    async def lane() -> None:
        for n in numbers:  # the lanes share one iterator
            event = {"type": "message", "channel": "C1", "user": "U1", "text": f"order {n}"}
            event["ts"] = f"1767225600.{n:06d}"
            delivery = await slack.send_event(url, event)
            assert delivery.delivered, delivery
            if n % 5 == 0:
                again = await slack.send_event(url, event, event_id=delivery.event_id)
                assert again.delivered, again
            ids.append(delivery.event_id)
            await asyncio.sleep(0.02)

    await asyncio.gather(*(lane() for _ in range(lanes)))
    return ids


def _assert_only_retried_failures(slack: SlackEvents) -> None:
    """Every attempt Slack made was answered 200, or ended in a way Slack retries with
    the same ``event_id``: the app's own 503 "the trigger did not answer in time" (verifying
    and storing the event took longer than its budget, 60 % of Slack's deadline) or no
    answer within Slack's 3 s (``http_timeout``) on a loaded machine. Both are timing, not
    correctness; the exactly-once checks cover the retries. Any other answer (a 4xx, a 500,
    a refused connection) is a defect."""
    wrong = [
        (a.status, a.failure, a.answer[:200])
        for d in slack.deliveries
        for a in d.attempts
        if a.status != 200
        and a.failure != "http_timeout"
        and not (a.status == 503 and b"did not answer in time" in a.answer)
    ]
    assert wrong == [], "answers other than 200, the trigger's deadline 503 or Slack's timeout"


async def test_app_webhook_worker_killed_mid_run(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    embedded_tmp_dir: Path,
    sink: HttpSink,
) -> None:
    sink.delay = 0.3
    wf_id, url = await _slack_flow(client, sink.url)
    slack = SlackEvents(SIGNING_SECRET, client=client, retry_delays=(0.0, 0.0, 0.0))
    with processes(settings, embedded_tmp_dir) as start:
        start("scheduler")
        sending = asyncio.create_task(_deliver(slack, url, EVENTS))
        try:
            killed = await _kill_worker_mid_call(runtime, start)
            ids = await asyncio.wait_for(sending, FLOW_LIMIT)
        finally:
            sending.cancel()
        await until_every_event_has_a_run(runtime, wf_id, ids, FLOW_LIMIT)
        await _until_succeeded(runtime, wf_id, EVENTS, embedded_tmp_dir)
    assert len(set(ids)) == EVENTS
    _assert_only_retried_failures(slack)
    await assert_exactly_once(runtime, wf_id, ids, lambda run: run["event_id"])
    await assert_calls_once_after_kill(runtime, wf_id, killed, EVENTS)
