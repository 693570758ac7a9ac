"""The fire-and-forget shape: ``runs`` runs of the 3-step scenario started at once, no caller
waiting for any of them, their ends counted where the engine records them.

Each engine answers a start once it has accepted the run (Railyard: 202 once the run is
stored; Restate: the ingress's ``/send``, 202 once the invocation is in its log; DBOS:
``start_workflow_async``, 202 once the workflow's start is stored; Node-RED, the
non-durable reference: 202 at once, the flow going on in memory). The starts go out as
fast as ``Plan.concurrency`` keep-alive connections allow (bench/webhooks.py's
``load_raw``); then the harness polls the engine's own record of finished runs
(:meth:`~bench.peers.engines.Peer.finished`) every 0.1 s until every accepted run ended
or ``Plan.phase_seconds`` passed. Figures (:func:`~bench.peers.stats.ff_rates`): accepted
starts per second, completed runs per second from the start of the load to the latest
recorded end, the starts' answer latency, runs accepted but not completed, and CPU per
run over the whole phase (starts and the runs' ends).
"""

from __future__ import annotations

import time

from backend.embedded import EmbeddedPostgres
from bench.common import postmaster_pid
from bench.peers.engines import Peer
from bench.peers.scenario import Plan, cpu_seconds, drive
from bench.peers.stats import Rounds, ff_rates, latency_figures, per_run

ACCEPTED = frozenset({200, 202})
POLL_SECONDS = 0.1


def settle(peer: Peer, before: int, expected: int, timeout: float) -> tuple[int, float]:
    """Poll ``peer.finished()`` until ``expected`` runs more than ``before`` ended (or
    ``timeout`` seconds passed): ``(runs ended since, epoch seconds of the latest end)``."""
    deadline = time.monotonic() + timeout
    while True:
        done, last = peer.finished()
        if done - before >= expected or time.monotonic() > deadline:
            return done - before, last
        time.sleep(POLL_SECONDS)


def fire_and_forget(
    peer: Peer, pg: EmbeddedPostgres | None, plan: Plan, out: Rounds, name: str = ""
) -> None:
    """The shape on a started ``peer`` (figures under ``name``, default its own): 20
    warm-up starts waited to their ends, then each phase of ``plan.ff_runs``.
    ``pg``: the PostgreSQL whose CPU counts for a peer that keeps its state there."""
    name = name or peer.name
    urls = peer.ff_urls()
    before, _ = peer.finished()
    warm = drive(urls, 2, plan.phase_seconds, limit=20, ok=ACCEPTED, timeout=60)
    settle(peer, before, len(warm["latencies"]), plan.phase_seconds)
    errors = warm["errors"]
    postmaster = [postmaster_pid(pg)] if pg is not None and peer.uses_pg else []
    for runs in plan.ff_runs:
        before, _ = peer.finished()
        cpu0 = cpu_seconds(peer.pids() + postmaster)
        started = time.time()
        sent = drive(
            urls, plan.concurrency, plan.phase_seconds, limit=runs, ok=ACCEPTED, timeout=60
        )
        accepted = len(sent["latencies"])
        ended, last = settle(peer, before, accepted, plan.phase_seconds)
        cpu1 = cpu_seconds(peer.pids() + postmaster)
        errors += sent["errors"]
        rates = ff_rates(accepted, sent["elapsed"], ended, started, last)
        out.add(name, f"ff_accepted_per_s_{runs}", rates["accepted_per_s"], "starts/s")
        out.add(name, f"ff_runs_per_s_{runs}", rates["completed_per_s"], "runs/s")
        out.add(name, f"ff_not_completed_{runs}", rates["not_completed"], "runs")
        figures = latency_figures(sent["latencies"])
        out.add(name, f"ff_accept_median_{runs}", figures["latency_median"], "ms")
        out.add(name, f"ff_accept_p95_{runs}", figures["latency_p95"], "ms")
        out.add(name, f"ff_cpu_per_run_{runs}", per_run(cpu1 - cpu0, ended, 1000), "ms")
    out.add(name, "ff_errors", errors, "requests")
