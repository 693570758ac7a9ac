"""PostgreSQL failover with real processes and real replication: a primary and a
synchronous streaming standby (tests/integration/pg_replication.py), ``railyard api``, two
``railyard worker`` and two ``railyard scheduler`` processes connected with one multi-host
URL (``?host=primary&host=standby&target_session_attrs=read-write``), a steady webhook load
of three-step runs (webhook -> HTTP call to a slow endpoint -> Set) and an every-second
schedule. The primary is SIGKILLed; after :data:`DETECTION_SECONDS` the standby is
promoted, as an HA manager would.

Checked: every run acknowledged (202 with its id) before, during or after the switch
completes exactly once (RPO 0: synchronous replication), each answer during the switch is
202 or 503 with ``Retry-After``, the processes are the same ones afterwards (no restart) and
ready again, and the schedule fired every instant exactly once across the switch. The
figures (seconds of 503, runs lost, ticks missed and doubled) are printed for
docs/operations.md, "PostgreSQL and Redis high availability".
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from backend.embedded import EmbeddedRedis, free_port
from backend.runtime import Runtime
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish
from tests.integration.pg_replication import (
    ReplicatedPostgres,
    kill_server,
    promote,
    replicated_postgres,
)
from tests.integration.railyard_processes import (
    api,
    every_second,
    fires,
    http_flow,
    own_settings,
    probe,
    processes,
    run_outcomes,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults]

DETECTION_SECONDS = 2.0
"""Seconds between the primary's death and the promotion: the HA manager noticing (a
CloudNativePG instance manager's liveness failing, then ``.spec.failoverDelay``, 0 s by
default)."""

LOAD_INTERVAL = 0.1
"""Seconds between two webhook requests of the load."""

RUNS_DEADLINE = 120.0
"""Seconds all acknowledged runs get to end after the load stops (the test's bound)."""


@dataclass
class Answers:
    """What the load's webhook requests got: ``(monotonic time, status, Retry-After)``,
    and the run ids of the 202s."""

    seen: list[tuple[float, int, str | None]] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)

    def accepted(self) -> int:
        return len(self.run_ids)


async def keep_posting(
    http: httpx.AsyncClient, path: str, answers: Answers, stop: asyncio.Event
) -> None:
    """Post one webhook every :data:`LOAD_INTERVAL` seconds until ``stop``."""
    n = 0
    while not stop.is_set():
        n += 1
        try:
            r = await http.post(path, json={"order": n})
        except httpx.TransportError as exc:  # the API process must keep answering
            raise AssertionError(f"the API did not answer: {exc!r}") from exc
        answers.seen.append((time.monotonic(), r.status_code, r.headers.get("retry-after")))
        if r.status_code == 202:
            answers.run_ids.append(r.json()["run_id"])
        await asyncio.sleep(LOAD_INTERVAL)


async def test_primary_killed_standby_promoted_nothing_acknowledged_is_lost(
    sink: HttpSink, embedded_tmp_dir: Path
) -> None:
    pg = await replicated_postgres(embedded_tmp_dir)
    redis = EmbeddedRedis(embedded_tmp_dir / "redis", persistence_off=True)
    redis.start()
    try:
        settings = own_settings(pg.url, redis.url)
        sink.delay = 0.2
        async with api(settings) as (rt, client):
            wf = await publish(client, http_flow(sink.url))
            await publish(client, every_second())
            port = free_port()
            probes = {name: free_port() for name in PROBED}
            with processes(settings, embedded_tmp_dir) as start:
                procs = [start("api", "api", "--port", str(port))]
                for name, health in probes.items():
                    kind = name.split("-")[0]
                    procs.append(start(kind, name, "--health-port", str(health)))
                base = f"http://127.0.0.1:{port}"
                async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                    figures = await _switch(rt, http, wf["webhook_path"], pg, sink, probes)
                for proc in procs:  # the same processes: nobody restarted them
                    assert proc.poll() is None, f"{proc.args} exited"
    finally:
        redis.stop()
        pg.stop()
    print(  # the figures of docs/operations.md
        "\n".join(f"figure: {name} = {value}" for name, value in figures.items())
    )


PROBED = ("worker-1", "worker-2", "scheduler-1", "scheduler-2")
"""The worker and scheduler processes, each with its readiness probe."""


async def _switch(
    rt: Runtime,
    http: httpx.AsyncClient,
    path: str,
    pg: ReplicatedPostgres,
    sink: HttpSink,
    probes: dict[str, int],
) -> dict[str, object]:
    """Load, kill, promote, check (module docstring); the figures."""
    await until(_ready(http), 60, "the API to be ready")
    for health in probes.values():
        await until(_probe_ready(health), 60, "workers and schedulers to be ready")
    answers = Answers()
    stop = asyncio.Event()
    load = asyncio.create_task(keep_posting(http, path, answers, stop))

    async def warmed_up() -> bool:
        return answers.accepted() >= 20 and len(sink.requests) >= 5 and len(await fires(rt)) >= 3

    await until(warmed_up, 60, "runs in flight and schedule fires before the kill")
    killed_at = time.monotonic()
    await asyncio.to_thread(kill_server, pg.primary)
    await asyncio.sleep(DETECTION_SECONDS)
    await asyncio.to_thread(promote, pg.standby)
    promoted_at = time.monotonic()

    async def accepted_after_promotion() -> bool:
        return sum(1 for at, status, _ in answers.seen if at > promoted_at and status == 202) >= 20

    await until(accepted_after_promotion, 60, "webhooks accepted on the new primary")
    stop.set()
    await load
    for health in probes.values():  # reconnected on their own
        await until(_probe_ready(health), 60, "workers and schedulers to be ready again")

    # Every answer is 202, or 503 with Retry-After during the switch, never anything else.
    odd = [a for a in answers.seen if a[1] not in (202, 503)]
    assert not odd, odd
    unavailable = [(at, retry) for at, status, retry in answers.seen if status == 503]
    assert unavailable, "no request fell into the switch"
    assert all(at > killed_at and retry == "5" for at, retry in unavailable), unavailable

    # Every acknowledged run is there and completed exactly once.
    deadline = time.monotonic() + RUNS_DEADLINE
    for run_id in answers.run_ids:
        left = max(1.0, deadline - time.monotonic())
        assert await wait_for_run(rt, run_id, timeout=left) == "succeeded", run_id
    outcomes = await run_outcomes(rt, answers.run_ids)
    assert outcomes == [("succeeded", 1, 1)] * len(answers.run_ids)

    # The schedule fired each instant once across the switch, each with its run.
    fired = len(await fires(rt))

    async def fired_on_new_primary() -> bool:
        rows = await fires(rt)
        return len(rows) >= fired + 3 and all(run_id is not None for _, run_id in rows)

    await until(fired_on_new_primary, 60, "fires by the scheduler leading on the new primary")
    instants = [at for at, _ in await fires(rt)]
    gaps = [b - a for a, b in itertools.pairwise(instants)]
    missed = sum(int(gap / timedelta(seconds=1)) - 1 for gap in gaps if gap > timedelta(seconds=1))
    doubled = len(instants) - len(set(instants))
    assert (missed, doubled) == (0, 0), instants
    return {
        "runs acknowledged": f"{len(answers.run_ids)} runs",
        "runs lost": f"{len(answers.run_ids) - len(outcomes)} runs",
        "503 answers": f"{len(unavailable)} requests",
        "seconds of 503": f"{unavailable[-1][0] - unavailable[0][0]:.1f} s",
        "503 after promotion": f"{max(0.0, unavailable[-1][0] - promoted_at):.1f} s",
        "ticks missed": f"{missed} ticks",
        "ticks doubled": f"{doubled} ticks",
    }


def _ready(http: httpx.AsyncClient) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        try:
            return (await http.get("/health/ready")).status_code == 200
        except httpx.TransportError:
            return False

    return check


def _probe_ready(port: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await probe(port))[0] == 200

    return check
