"""Scheduler failover with two real ``railyard scheduler`` processes and an every-second
schedule: the leader is SIGKILLed (or SIGTERMed); the standby takes over and, across the
switch, every fire instant fires exactly once (``schedule_fires``: one row per instant,
contiguous, each with its run; one run per instant)."""

from __future__ import annotations

import itertools
import signal
import socket
import subprocess
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from backend.embedded import free_port
from backend.runtime import Runtime
from backend.services.operations import dashboard
from backend.services.operations.leadership import SCHEDULER_LOCK_KEY
from backend.settings import Settings
from tests.integration.flows import publish
from tests.integration.railyard_processes import (
    every_second,
    fires,
    leader_pid,
    probe,
    processes,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

STANDBY_WAIT = 0.5  # RAILYARD_SWEEP_INTERVAL of the processes: a standby's longest lock wait
TAKEOVER_BOUND = STANDBY_WAIT + 5.0  # takeover is at once; room for a loaded machine


async def scheduled_runs(runtime: Runtime) -> list[str]:
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text("select idempotency_key from runs where idempotency_key like 'schedule:%'")
        )
        return [r[0] for r in rows]


async def switch_leader(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    log_dir: Path,
    how: signal.Signals,
) -> None:
    """Two schedulers; ``how`` stops the leader after a few fires; the standby must take
    over within :data:`TAKEOVER_BOUND` and fire on; then every instant fired once."""
    await publish(client, every_second())
    try:
        await _switch(runtime, settings, log_dir, how)
    except AssertionError as exc:  # say what the schedulers logged
        raise AssertionError(f"{exc}\n{_logs(log_dir)}") from exc


def _logs(log_dir: Path) -> str:
    """The end of each scheduler's log."""
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
        for p in sorted(log_dir.glob("scheduler-*.log"))
    )


async def _switch(runtime: Runtime, settings: Settings, log_dir: Path, how: signal.Signals) -> None:
    with processes(settings, log_dir) as start:
        first = start("scheduler", "scheduler-1")
        await until(lambda: _has_leader(runtime), 30, "the first scheduler to lead")
        old = await leader_pid(runtime)
        start("scheduler", "scheduler-2")
        # the standby must be up (a cold start imports the whole catalog, seconds on a
        # busy machine) before its takeover is timed
        await until(lambda: _standing_by(runtime), 60, "the second scheduler to stand by")
        await until(lambda: _fired_at_least(runtime, 3), 30, "three fires by the first leader")
        first.send_signal(how)
        try:
            code = first.wait(20)
        except subprocess.TimeoutExpired:
            raise AssertionError("the leader did not exit") from None
        assert code == (0 if how == signal.SIGTERM else -signal.SIGKILL)
        before = len(await fires(runtime))

        async def new_leader() -> bool:
            pid = await leader_pid(runtime)
            return pid is not None and pid != old

        await until(new_leader, TAKEOVER_BOUND, "the standby to take the leader lock")
        await until(lambda: _fired_at_least(runtime, before + 3), 30, "fires by the new leader")
        claimed = len(await fires(runtime))

        async def started() -> bool:  # the killed leader's pending fire included
            return all(run_id is not None for _, run_id in (await fires(runtime))[:claimed])

        await until(started, 30, "every fire claimed so far to start its run")
    rows = (await fires(runtime))[:claimed]
    instants = [r[0] for r in rows]
    assert len(set(instants)) == len(instants)  # no duplicate fire
    gaps = {b - a for a, b in itertools.pairwise(instants)}
    assert gaps == {timedelta(seconds=1)}, instants  # no missed fire
    # one run per instant, each recorded on its fire
    runs = await scheduled_runs(runtime)
    assert len({run_id for _, run_id in rows}) == len(rows)
    assert len(runs) == len(set(runs)) >= len(rows)


async def _standing_by(runtime: Runtime) -> bool:
    """True while a session waits for the leader lock (a standby scheduler)."""
    key = SCHEDULER_LOCK_KEY
    async with runtime.engine.connect() as conn:
        waiting = await conn.execute(
            text(
                "select count(*) from pg_locks where locktype = 'advisory' and not granted"
                " and classid = :hi and objid = :lo and objsubid = 1"
            ),
            {"hi": key >> 32, "lo": key & 0xFFFFFFFF},
        )
        return bool(waiting.scalar_one())


async def _has_leader(runtime: Runtime) -> bool:
    return await leader_pid(runtime) is not None


async def _fired_at_least(runtime: Runtime, n: int) -> bool:
    return len(await fires(runtime)) >= n


async def test_scheduler_failover_after_sigkill_of_the_leader(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, embedded_tmp_dir: Path
) -> None:
    await switch_leader(client, runtime, settings, embedded_tmp_dir, signal.SIGKILL)


async def test_scheduler_failover_after_sigterm_of_the_leader(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, embedded_tmp_dir: Path
) -> None:
    await switch_leader(client, runtime, settings, embedded_tmp_dir, signal.SIGTERM)


async def test_leadership_is_visible_in_probes_metrics_and_dashboard(
    runtime: Runtime, settings: Settings, embedded_tmp_dir: Path
) -> None:
    """Two schedulers: the leader's readiness says ``"role": "leader"`` and its gauge 1,
    the standby's ``"standby"`` (and 200: it is ready to take over) and 0; the dashboard
    names the leader's process; after the leader's SIGKILL the standby says it leads."""
    ports = [free_port(), free_port()]
    with processes(settings, embedded_tmp_dir) as start:
        procs = [
            start("scheduler", f"scheduler-{n}", "--health-port", str(port))
            for n, port in enumerate(ports)
        ]

        async def one_leads() -> bool:
            roles = [(await probe(port))[1].get("role") for port in ports]
            return sorted(roles, key=str) == ["leader", "standby"]

        await until(one_leads, 30, "one scheduler to lead, the other to stand by")
        answers = [await probe(port) for port in ports]
        assert [status for status, _ in answers] == [200, 200]
        lead = next(n for n, (_, body) in enumerate(answers) if body["role"] == "leader")
        host = socket.gethostname()
        for n, port in enumerate(ports):
            assert await leader_gauge(port, f"{host}:{procs[n].pid}") == (1 if n == lead else 0)
        board = await dashboard.load(runtime.sessionmaker, runtime.redis, minutes=15)
        assert board.leader is not None and board.leader[0] == f"{host}:{procs[lead].pid}"

        procs[lead].send_signal(signal.SIGKILL)
        procs[lead].wait(10)
        other = 1 - lead

        async def took_over() -> bool:
            return (await probe(ports[other]))[1].get("role") == "leader"

        await until(took_over, TAKEOVER_BOUND, "the standby to say it leads")
        assert await leader_gauge(ports[other], f"{host}:{procs[other].pid}") == 1
        board = await dashboard.load(runtime.sessionmaker, runtime.redis, minutes=15)
        assert board.leader is not None and board.leader[0] == f"{host}:{procs[other].pid}"


async def leader_gauge(port: int, scheduler: str) -> float:
    """``railyard_scheduler_leader{scheduler=...}`` from the process's ``/metrics``."""
    async with httpx.AsyncClient(timeout=5) as c:
        text_format = (await c.get(f"http://127.0.0.1:{port}/metrics")).text
    for family in text_string_to_metric_families(text_format):
        for sample in family.samples:
            if sample.name == "railyard_scheduler_leader":
                assert sample.labels == {"scheduler": scheduler}, sample
                return sample.value
    raise AssertionError("no railyard_scheduler_leader in /metrics")
