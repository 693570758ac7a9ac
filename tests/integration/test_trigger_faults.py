"""Exactly one run per event with real processes killed mid-delivery (issue 26).

Each test runs real ``railyard scheduler`` / ``api`` / ``worker`` / ``events`` processes
(railyard_processes.py: lease 3 s, sweep every 0.5 s) against the session's PostgreSQL
and Redis, SIGKILLs them while events arrive, and checks at the end that every event has
exactly one inbox row and exactly one run, and nothing else started a run:

- polling (``http.new_items`` on a vendor whose items keep arriving): the scheduler
  leader killed with a poll in flight, then with a run start in flight; a standby takes
  over each time; the stored cursor, sampled all along, never goes back;
- app webhook (the fault plugin's signed trigger): the API killed while a sender posts
  signed deliveries and retries what failed, then killed with a run start in flight.

A kill "with a run start in flight" holds the ``runs`` table locked (trigger_faults.py,
:func:`runs_locked`) until the process waits on it, so the event is stored and its run
is not: the scheduler's sweep starts it. The tests assert no timing.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.triggers.events.polling import claim_due, poll_one
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration import fault_plugin
from tests.integration.flows import publish
from tests.integration.railyard_processes import leader_pid, processes, until
from tests.integration.trigger_faults import (
    ItemsVendor,
    Sampler,
    SignedSender,
    assert_exactly_once,
    install_fault_plugin,
    items_trigger,
    monotonic,
    poll_every_second,
    run_start_waiting,
    runs_locked,
    until_every_event_has_a_run,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

SWEEP_BOUND = 40.0
"""Seconds to wait for the last runs: the sweep starts a stored event's run 10 s after it
was stored; room for a loaded machine."""


def _flow(trigger: dict[str, Any]) -> dict[str, Any]:
    return diagram(
        [trigger, node("note", "control.set", mapping={"seen": "=$"})],
        [edge(trigger["id"], "note")],
    )


async def _cursor(runtime: Runtime, workflow_id: str) -> Any:
    async with runtime.engine.connect() as conn:
        return (
            await conn.execute(
                text("select cursor from trigger_subscriptions where workflow_id = :w"),
                {"w": workflow_id},
            )
        ).scalar_one()


async def test_polling_exactly_once_across_scheduler_leader_kills(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, embedded_tmp_dir: Path
) -> None:
    vendor = ItemsVendor(total=240, every=0.05).start()
    try:
        wf = await publish(client, _flow(items_trigger(vendor)))
        await poll_every_second(runtime, wf["id"])
        with processes(settings, embedded_tmp_dir) as start:
            async with Sampler(lambda: _cursor(runtime, wf["id"])) as cursors:
                await _leader_kills(runtime, vendor, wf["id"], start)
                await until(lambda: _true(vendor.done), 60, "the vendor's last item")
                expected = [item["id"] for item in vendor.items]
                await until_every_event_has_a_run(runtime, wf["id"], expected, SWEEP_BOUND)
                await until(
                    lambda: _cursor_at(runtime, wf["id"], vendor.total), 30, "the last poll"
                )
        await assert_exactly_once(runtime, wf["id"], expected, lambda run: run["id"])
        after = [c["after"] for c in cursors.values if c is not None]
        assert monotonic(after, lambda v: v), after
        assert after[-1] == vendor.total
    finally:
        vendor.stop()


async def test_a_deposed_leaders_late_poll_never_moves_the_cursor_back(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """A leader whose lock's session ended mid-poll may store after the new leader
    polled: its events are kept (the inbox dedupes them), its older cursor is not."""
    vendor = ItemsVendor(total=5, every=0).start()
    try:
        await until(lambda: _true(vendor.done), 10, "the vendor's items")
        wf = await publish(client, _flow(items_trigger(vendor)))
        env, clock = runtime.events, runtime.execution.clock
        [late] = await claim_due(env, clock.now())
        async with runtime.engine.begin() as conn:  # the new leader's poll stored first
            await conn.execute(
                text(
                    "update trigger_subscriptions set cursor = '{\"after\": 9}'"
                    " where workflow_id = :w"
                ),
                {"w": wf["id"]},
            )
        assert await poll_one(env, late, clock) == 5
    finally:
        vendor.stop()
    assert await _cursor(runtime, wf["id"]) == {"after": 9}
    expected = [f"item-{n}" for n in range(1, 6)]
    await assert_exactly_once(runtime, wf["id"], expected, lambda run: run["id"])


async def _true(value: bool) -> bool:
    return value


async def _cursor_at(runtime: Runtime, workflow_id: str, seq: int) -> bool:
    cursor = await _cursor(runtime, workflow_id)
    return isinstance(cursor, dict) and cursor.get("after") == seq


async def _leader_kills(
    runtime: Runtime, vendor: ItemsVendor, workflow_id: str, start: Any
) -> None:
    """scheduler-1 leads, scheduler-2 stands by; the leader is killed with a poll in
    flight (scheduler-2 takes over, scheduler-3 stands by), then with a run start in
    flight (scheduler-3 takes over)."""
    leader = start("scheduler", "scheduler-1")
    await until(lambda: _has_leader(runtime), 30, "scheduler-1 to lead")
    await until(lambda: _cursor_polled(runtime, workflow_id), 30, "the first poll")
    standby = start("scheduler", "scheduler-2")

    old = await leader_pid(runtime)
    vendor.hold()  # the next poll waits for its answer
    await until(lambda: _true(vendor.held.is_set()), 30, "a poll in flight")
    leader.send_signal(signal.SIGKILL)
    leader.wait(5)
    vendor.release()
    await until(lambda: _new_leader(runtime, old), 30, "scheduler-2 to take over")
    leader = standby
    start("scheduler", "scheduler-3")  # the next standby

    old = await leader_pid(runtime)
    async with runs_locked(runtime):
        await until(lambda: run_start_waiting(runtime), 30, "a run start in flight")
        leader.send_signal(signal.SIGKILL)
        leader.wait(5)
    await until(lambda: _new_leader(runtime, old), 30, "scheduler-3 to take over")


async def _has_leader(runtime: Runtime) -> bool:
    return await leader_pid(runtime) is not None


async def _new_leader(runtime: Runtime, old: int | None) -> bool:
    pid = await leader_pid(runtime)
    return pid is not None and pid != old


async def _cursor_polled(runtime: Runtime, workflow_id: str) -> bool:
    return await _cursor(runtime, workflow_id) is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_app_webhook_exactly_once_across_api_kills(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, embedded_tmp_dir: Path
) -> None:
    if "faultkit.signed_event" not in runtime.catalog.triggers:
        runtime.catalog.add_connector(fault_plugin.connector, source="extra")
    secret = uuid.uuid4().hex
    wf = await publish(client, _flow(node("hook", "faultkit.signed_event", secret=secret)))
    async with runtime.engine.connect() as conn:
        token = (
            await conn.execute(
                text("select token from trigger_subscriptions where workflow_id = :w"),
                {"w": wf["id"]},
            )
        ).scalar_one()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = install_fault_plugin(embedded_tmp_dir / "plugin")
    sender = SignedSender(f"{base}/hooks/app/{token}", secret, count=150)
    with processes(settings, embedded_tmp_dir, **env) as start:
        start("scheduler")
        api = start("api", "api-1", "--port", str(port))
        await _until_ready(base)
        sending = asyncio.create_task(sender.run())
        try:
            await _api_kills(runtime, sender, start, api, port, base)
            await asyncio.wait_for(sending, 120)
        finally:
            sending.cancel()
        await until_every_event_has_a_run(runtime, wf["id"], sender.ids(), SWEEP_BOUND)
    assert sender.failures > 0  # the kills were felt
    await assert_exactly_once(runtime, wf["id"], sender.ids(), lambda run: run["id"])


async def _until_ready(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:

        async def ready() -> bool:
            try:
                return (await http.get("/health/ready")).status_code == 200
            except httpx.TransportError:
                return False

        await until(ready, 30, "the API to be ready")


async def _api_kills(
    runtime: Runtime, sender: SignedSender, start: Any, api: Any, port: int, base: str
) -> None:
    """The API killed mid-stream and started again; then killed with a run start in
    flight (its delivery answered, the run not yet stored) and started again."""

    async def delivered(n: int) -> bool:
        return len(sender.delivered) >= n

    await until(lambda: delivered(40), 60, "40 deliveries")
    api.send_signal(signal.SIGKILL)
    api.wait(5)
    await asyncio.sleep(0.5)  # deliveries fail meanwhile: the sender retries them
    api = start("api", "api-2", "--port", str(port))
    await _until_ready(base)

    await until(lambda: delivered(80), 60, "80 deliveries")
    async with runs_locked(runtime):
        await until(lambda: run_start_waiting(runtime), 30, "a run start in flight")
        api.send_signal(signal.SIGKILL)
        api.wait(5)
    start("api", "api-3", "--port", str(port))
    await _until_ready(base)
