"""One round of one engine: the 3-step scenario, Webhook -> Set -> If, pgbench.

Requests come from bench/webhooks.py's lean HTTP/1.1 load generator (``load_raw``) on
uvloop, bounded in requests and seconds. CPU is user + system time from /proc of the
engine's processes (and of PostgreSQL's postmaster with every backend, live or ended, when
the engine keeps its state there); PostgreSQL write transactions are counted by
``pg_current_xact_id()`` before and after a phase.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from backend.embedded import EmbeddedPostgres
from backend.workers.worker import loop_factory
from bench.common import postmaster_pid, tree_cpu_seconds
from bench.peers.engines import Peer
from bench.peers.profile import Sampler, report
from bench.peers.railyard_peer import Railyard
from bench.peers.stats import Rounds, latency_figures, per_run, write_transactions
from bench.webhooks import load_raw

OK = frozenset({200})


@dataclass
class Plan:
    """Sizes and bounds of a round (requests, seconds, concurrency)."""

    latency_runs: int = 100
    throughput_runs: tuple[int, ...] = (200, 1000)
    ff_runs: tuple[int, ...] = (1000,)
    """Runs per phase of the fire-and-forget shape (bench/peers/fire_and_forget.py)."""
    ff_warmup_runs: int = 200
    """Warm-up starts of the fire-and-forget shape, sent at ``concurrency`` and waited to
    their ends before its phases (not in the figures), so each phase measures an engine
    in its steady state: its connection pools and caches as large as that load needs."""
    concurrency: int = 32
    phase_seconds: float = 300.0
    """Upper bound of any one phase; a phase that hits it reports fewer runs."""
    setif_seconds: float = 10.0
    setif_connections: int = 16
    pgbench_seconds: float = 5.0
    pgbench_clients: int = 8
    profile_runs: int = 0
    """Runs of an extra phase sampled with py-spy (Railyard only; 0: none)."""
    profile_dir: Path | None = None


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the processes ``pids`` and their reaped children
    (a process gone meanwhile counts 0)."""
    total = 0.0
    for pid in pids:
        try:
            total += tree_cpu_seconds(pid)
        except FileNotFoundError:
            continue
    return total


async def current_xid(pg: EmbeddedPostgres) -> int:
    """``pg_current_xact_id()`` of the server (it takes one id itself)."""
    conn = await asyncpg.connect(pg.dsn)
    try:
        return int(await conn.fetchval("select pg_current_xact_id()::text"))
    finally:
        await conn.close()


def drive(urls: list[str], connections: int, seconds: float, **kw: Any) -> dict[str, Any]:
    """``load_raw`` on a fresh uvloop event loop (see bench/webhooks.py)."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(load_raw(urls, connections, seconds, **kw))


def check_answer(url: str, timeout: float = 120.0) -> str:
    """POST one request until the engine answers 200 with ``step3`` in the body (it may
    still be starting: Restate's partitions, Node-RED's flows); returns the body.

    Raises RuntimeError with the last answer when it never does."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            answer = httpx.post(url, json={"id": 0, "qty": 1}, timeout=60)
            last = f"{answer.status_code} {answer.text[:300]}"
            if answer.status_code == 200 and "step3" in answer.text:
                return answer.text
        except httpx.HTTPError as err:
            last = repr(err)
        time.sleep(0.5)
    raise RuntimeError(f"{url} never answered the scenario correctly; last: {last}")


def three_steps(peer: Peer, pg: EmbeddedPostgres, plan: Plan, out: Rounds) -> None:
    """The 3-step scenario on a started ``peer``: warm-up, ``latency_runs`` sequential
    runs, then each of ``throughput_runs`` started as fast as ``concurrency`` allows."""
    urls = peer.urls()
    check_answer(urls[0])
    drive(urls, 2, plan.phase_seconds, limit=20, ok=OK, timeout=60)  # warm-up
    name = peer.name
    seq = drive(urls, 1, plan.phase_seconds, limit=plan.latency_runs, ok=OK, timeout=60)
    for key, value in latency_figures(seq["latencies"]).items():
        out.add(name, key, value, "ms")
    errors = seq["errors"]
    postmaster = postmaster_pid(pg)
    for runs in plan.throughput_runs:
        xid0 = asyncio.run(current_xid(pg))
        engine0, pg0 = cpu_seconds(peer.pids()), cpu_seconds([postmaster])
        done = drive(urls, plan.concurrency, plan.phase_seconds, limit=runs, ok=OK, timeout=60)
        engine1, pg1 = cpu_seconds(peer.pids()), cpu_seconds([postmaster])
        xid1 = asyncio.run(current_xid(pg))
        ok = len(done["latencies"])
        errors += done["errors"]
        out.add(name, f"runs_per_s_{runs}", ok / done["elapsed"], "runs/s")
        if runs != max(plan.throughput_runs):
            continue
        pg_cpu = pg1 - pg0 if peer.uses_pg else 0.0
        out.add(name, "engine_cpu_per_run", per_run(engine1 - engine0, ok, 1000), "ms")
        out.add(name, "cpu_per_run", per_run(engine1 - engine0 + pg_cpu, ok, 1000), "ms")
        if peer.uses_pg:
            out.add(name, "pg_cpu_per_run", per_run(pg_cpu, ok, 1000), "ms")
            out.add(name, "pg_write_xacts_per_run", per_run(write_transactions(xid0, xid1), ok), "")
    out.add(name, "errors", errors, "requests")
    if plan.profile_runs and isinstance(peer, Railyard) and plan.profile_dir is not None:
        profile(peer, plan, plan.profile_dir)


def profile(peer: Railyard, plan: Plan, where: Path) -> None:
    """An extra phase of ``plan.profile_runs`` runs (not in the figures: the sampler takes
    CPU too) with py-spy on every Railyard process; prints the shares per process and of
    all processes together (``# profile ...`` lines; the stacks stay in ``where``)."""
    sampler = Sampler(where)
    for role, pid in peer.procs.named():
        sampler.attach(role, pid)
    time.sleep(1.0)  # py-spy attached
    urls = peer.urls()
    drive(urls, plan.concurrency, plan.phase_seconds, limit=plan.profile_runs, ok=OK, timeout=60)
    for role, summary in sampler.detach().items():
        for line in report(role, summary):
            print(line, flush=True)


def set_if_node_red(peer: Peer, plan: Plan, out: Rounds) -> None:
    """Webhook -> Set -> If on Node-RED: every 200 is a completed (non-durable) run."""
    urls = peer.urls()
    deadline = time.monotonic() + 60
    while httpx.post(urls[0], json={"id": 0, "qty": 1}, timeout=10).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("Node-RED never answered the flow")
        time.sleep(0.5)
    done = drive(urls, plan.setif_connections, plan.setif_seconds, ok=OK)
    lat = done["latencies"]
    out.add("set_if.node-red", "completed_runs_per_s", len(lat) / done["elapsed"], "runs/s")
    out.add("set_if.node-red", "latency_p99", latency_figures(lat)["latency_p99"], "ms")
    out.add("set_if.node-red", "errors", done["errors"], "requests")


def _settled(peer: Railyard, timeout: float = 120.0) -> tuple[int, int, float]:
    """Wait until every stored Set -> If run ended (or ``timeout`` s); ``peer.completed()``."""
    deadline = time.monotonic() + timeout
    stored, ok, last = asyncio.run(peer.completed())
    while ok < stored and time.monotonic() < deadline:
        time.sleep(0.2)
        stored, ok, last = asyncio.run(peer.completed())
    return stored, ok, last


def set_if_railyard(peer: Railyard, plan: Plan, out: Rounds) -> None:
    """Webhook -> Set -> If on Railyard: 202 once stored; completed runs/s counts the runs
    that succeeded, from the start of the load to the last one's ``finished_at``. A warm-up
    of 20 requests (workers connected, caches filled) ends before the load starts."""
    peer.scenario = "set_if"
    try:
        urls = peer.urls()
        drive(urls, 2, plan.phase_seconds, limit=20)
        stored0, ok0, _ = _settled(peer)
        start = time.time()
        done = drive(urls, plan.setif_connections, plan.setif_seconds)
        stored, ok, last = _settled(peer)
    finally:
        peer.scenario = "three_steps"
    lat = done["latencies"]
    name = "set_if.railyard"
    out.add(name, "accepted_per_s", len(lat) / done["elapsed"], "req/s")
    out.add(name, "completed_runs_per_s", (ok - ok0) / max(last - start, 1e-9), "runs/s")
    out.add(name, "latency_p99", latency_figures(lat)["latency_p99"], "ms")
    out.add(name, "not_completed", (stored - stored0) - (ok - ok0), "runs")
    out.add(name, "errors", done["errors"], "requests")
