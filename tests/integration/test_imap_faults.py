"""Email received: exactly one run per message with real processes killed and the mail
server restarted while mail arrives (issue 26).

Real ``railyard scheduler``, ``worker`` and ``events`` processes (railyard_processes.py;
subscription lease 3 s) watch a mailbox of a Dovecot of the test's own while a thread
appends :data:`COUNT` messages, each with its own Message-ID, one after the other (an
append cut off by the restart is made again: a second copy of a Message-ID is the
at-least-once delivery of mail, and starts no second run). Meanwhile the events process
is SIGKILLed mid-stream, Dovecot is restarted (same ports and mailboxes: the new events
process opens the subscription again by itself), and the events process is SIGKILLed
again with a run start in flight (the ``runs`` table locked until it waits on it: the
scheduler's sweep starts the stored events' runs). A second test (on the session's
Dovecot) kills the scheduler leader while its sweep starts such runs (its run start
waiting on the same lock); the standby scheduler takes over and its sweep starts them.
Then every Message-ID has exactly one inbox row and one succeeded run (trigger_faults.py,
:func:`assert_exactly_once`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.settings import Settings
from tests.imap_server import Dovecot, MailUser
from tests.integration.conftest import TEST_ENCRYPTION_KEY
from tests.integration.mailbox import mail, message_id, published_watch
from tests.integration.railyard_processes import (
    has_leader,
    leader_pid,
    new_leader,
    processes,
    until,
)
from tests.integration.trigger_faults import (
    assert_exactly_once,
    kill,
    run_start_waiters,
    run_start_waiting,
    runs_locked,
    until_every_event_has_a_run,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

COUNT = 120
"""Messages appended."""

LIMIT = 120.0
"""Seconds any one phase may take on a loaded machine."""


class Sender:
    """Appends messages 0 .. :data:`COUNT` - 1 in a thread, ``pace`` seconds apart, each
    until the server confirms it (again after a refused or cut connection)."""

    def __init__(self, user: MailUser, pace: float = 0.15) -> None:
        self.user = user
        self.pace = pace
        self.sent = 0
        self.failures = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for n in range(COUNT):
            while not self.stop.is_set():
                try:
                    self.user.deliver(mail(n))
                    break
                except Exception:  # the server restarting: again
                    self.failures += 1
                    self.stop.wait(0.2)
            self.sent += 1
            if self.stop.wait(self.pace):
                return


async def _runs(runtime: Runtime, workflow_id: str) -> int:
    async with runtime.engine.connect() as conn:
        found = await conn.execute(
            text("select count(*) from runs where workflow_id = :w"), {"w": workflow_id}
        )
        return int(found.scalar_one())


async def _until_runs(runtime: Runtime, workflow_id: str, n: int, what: str) -> None:
    async def enough() -> bool:
        return await _runs(runtime, workflow_id) >= n

    await until(enough, LIMIT, what)


ENV = {
    "RAILYARD_SUBSCRIPTION_LEASE_SECONDS": "3",
    "RAILYARD_ENCRYPTION_KEY": TEST_ENCRYPTION_KEY,
}
"""Environment of the processes: a killed events process's subscription is taken over
within 3 s; the key the test's credentials are encrypted with."""


async def _every_message_once(runtime: Runtime, workflow_id: str, sender: Sender) -> None:
    """Wait for the last append, every Message-ID's run and every run's end; then check
    exactly one inbox row and one succeeded run per Message-ID."""
    await asyncio.to_thread(sender.thread.join, LIMIT)
    assert sender.sent == COUNT
    expected = [message_id(n) for n in range(COUNT)]
    # a stored event whose run a killed process did not start waits for the sweep (10 s)
    await until_every_event_has_a_run(runtime, workflow_id, expected, LIMIT)

    async def ended() -> bool:
        async with runtime.engine.connect() as conn:
            done = await conn.execute(
                text("select count(*) from runs where workflow_id = :w and status = 'succeeded'"),
                {"w": workflow_id},
            )
            return int(done.scalar_one()) >= COUNT

    await until(ended, LIMIT, "every run to succeed")
    await assert_exactly_once(
        runtime, workflow_id, expected, lambda run: run["headers"]["message_id"]
    )


@contextlib.contextmanager
def _sending(sender: Sender) -> Iterator[Sender]:
    """Append the messages in the background while inside."""
    sender.thread.start()
    try:
        yield sender
    finally:
        sender.stop.set()
        with contextlib.suppress(RuntimeError):
            sender.thread.join(10)


async def test_email_exactly_once_across_events_kills_and_a_server_restart(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    embedded_tmp_dir: Path,
    own_imap_server: Dovecot,
) -> None:
    user = own_imap_server.add_user()
    wf = await published_watch(client, user)
    sender = Sender(user)
    with processes(settings, embedded_tmp_dir, **ENV) as start, _sending(sender):
        start("scheduler")
        start("worker", "worker-1")
        start("worker", "worker-2")
        events = start("events", "events-1")
        await _until_runs(runtime, wf["id"], 10, "the first runs")
        assert sender.sent < COUNT
        kill(events)  # mid-stream: what it stored is not flagged yet
        events = start("events", "events-2")
        stored = await _runs(runtime, wf["id"])
        await _until_runs(runtime, wf["id"], stored + 10, "events-2 to store runs")
        assert sender.sent < COUNT
        await asyncio.to_thread(own_imap_server.stop)
        await asyncio.to_thread(own_imap_server.restart)
        stored = await _runs(runtime, wf["id"])
        await _until_runs(runtime, wf["id"], stored + 10, "runs after the restart")
        async with runs_locked(runtime):
            await until(lambda: run_start_waiting(runtime), 60, "a run start in flight")
            kill(events)  # its events are stored, their runs are not
        start("events", "events-3")
        await _every_message_once(runtime, wf["id"], sender)
    assert sender.failures > 0, "the restart cut some appends off"


async def test_scheduler_leader_killed_while_sweeping_email(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    embedded_tmp_dir: Path,
    imap_server: Dovecot,
) -> None:
    """The events process is killed with a run start in flight, so its stored messages
    have no run; the scheduler leader's sweep starts them and is killed with its own run
    start in flight; the standby takes over and its sweep starts them."""
    user = imap_server.add_user()
    wf = await published_watch(client, user)
    sender = Sender(user)
    with processes(settings, embedded_tmp_dir, **ENV) as start, _sending(sender):
        leader = start("scheduler")
        start("worker", "worker-1")
        start("worker", "worker-2")
        events = start("events", "events-1")
        await until(lambda: has_leader(runtime), 30, "the scheduler to lead")
        start("scheduler", "scheduler-2")  # the standby
        await _until_runs(runtime, wf["id"], 10, "the first runs")
        assert sender.sent < COUNT
        async with runs_locked(runtime):
            await until(lambda: run_start_waiting(runtime), 60, "a run start in flight")
            waiting = await run_start_waiters(runtime)
            kill(events)  # its events are stored, their runs are not

            async def sweeping() -> bool:  # the leader's sweep waits on the lock
                return bool(await run_start_waiters(runtime) - waiting)

            await until(sweeping, 60, "the leader's sweep to start runs")
            old = await leader_pid(runtime)
            kill(leader)
        start("events", "events-2")
        await until(lambda: new_leader(runtime, old), 60, "the standby to lead")
        await _every_message_once(runtime, wf["id"], sender)
