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
run over the whole phase (starts and the runs' ends); for Railyard also per process role
(``ff_cpu_per_run_<role>_<runs>``: the API, the workers, Redis, PostgreSQL), and with
``Plan.profile_runs`` an extra phase sampled by py-spy (:func:`profile`).

For Railyard, :func:`intake` then measures the same starts with its workers frozen: the
starts its API accepts per second when nothing else runs, the ceiling of its accepted
starts in this shape, beside the other engines' accepted starts while they execute.
"""

from __future__ import annotations

import time
from pathlib import Path

from backend.embedded import EmbeddedPostgres
from bench.common import postmaster_pid
from bench.peers.engines import Peer
from bench.peers.profile import Sampler, report
from bench.peers.railyard_peer import Railyard
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


def role_cpu(peer: Peer, postmaster: list[int]) -> dict[str, float]:
    """CPU seconds so far of each role of a Railyard ``peer`` (``api``, ``worker``,
    ``redis``, and ``postgres`` for ``postmaster``); empty for another engine."""
    if not isinstance(peer, Railyard):
        return {}
    found: dict[str, float] = {"postgres": cpu_seconds(postmaster)} if postmaster else {}
    for role, pid in peer.roles():
        found[role] = found.get(role, 0.0) + cpu_seconds([pid])
    return found


def profile(peer: Railyard, plan: Plan, where: Path) -> None:
    """An extra fire-and-forget phase of ``plan.profile_runs`` starts (not in the figures:
    the sampler takes CPU too), waited to their ends, with py-spy on every Railyard
    process; prints the shares per process and of all together (``# profile ...``)."""
    sampler = Sampler(where / "ff")
    for role, pid in peer.procs.named():
        sampler.attach(role, pid)
    time.sleep(1.0)  # py-spy attached
    before, _ = peer.finished()
    sent = drive(
        peer.ff_urls(),
        plan.concurrency,
        plan.phase_seconds,
        limit=plan.profile_runs,
        ok=ACCEPTED,
        timeout=60,
    )
    settle(peer, before, len(sent["latencies"]), plan.phase_seconds)
    for role, summary in sampler.detach().items():
        for line in report(f"ff {role}", summary):
            print(line, flush=True)


def intake(peer: Railyard, pg: EmbeddedPostgres, plan: Plan, out: Rounds) -> None:
    """Each phase of ``plan.ff_runs`` starts sent with Railyard's workers frozen
    (:meth:`~bench.peers.railyard_peer.Railyard.pause_workers`), then thawed and the runs
    waited to their ends. Figures: ``intake_accepted_per_s_<runs>``,
    ``intake_accept_median_<runs>`` (ms) and the CPU per start of the API processes and of
    PostgreSQL (``intake_cpu_per_start_<role>_<runs>``, ms)."""
    urls = peer.ff_urls()
    postmaster = [postmaster_pid(pg)]
    for runs in plan.ff_runs:
        before, _ = peer.finished()
        peer.pause_workers()
        try:
            roles0 = role_cpu(peer, postmaster)
            sent = drive(
                urls, plan.concurrency, plan.phase_seconds, limit=runs, ok=ACCEPTED, timeout=60
            )
            roles1 = role_cpu(peer, postmaster)
        finally:
            peer.pause_workers(False)
        accepted = len(sent["latencies"])
        settle(peer, before, accepted, plan.phase_seconds)
        rate = accepted / sent["elapsed"]
        out.add(peer.name, f"intake_accepted_per_s_{runs}", rate, "starts/s")
        figures = latency_figures(sent["latencies"])
        out.add(peer.name, f"intake_accept_median_{runs}", figures["latency_median"], "ms")
        for role in ("api", "postgres"):
            used = per_run(roles1.get(role, 0.0) - roles0.get(role, 0.0), accepted, 1000)
            out.add(peer.name, f"intake_cpu_per_start_{role}_{runs}", used, "ms")
        out.add(peer.name, "intake_errors", sent["errors"], "requests")


def fire_and_forget(
    peer: Peer, pg: EmbeddedPostgres | None, plan: Plan, out: Rounds, name: str = ""
) -> None:
    """The shape on a started ``peer`` (figures under ``name``, default its own):
    ``plan.ff_warmup_runs`` warm-up starts at the phase's concurrency, waited to their ends
    (a Railyard worker opens its PostgreSQL connections as its job slots first fill, and a
    new connection costs PostgreSQL tens of milliseconds of CPU: asyncpg's type
    introspection and the first five plans of each hot statement; a cold phase would
    count that start-up in its runs), then each phase of ``plan.ff_runs``.
    ``pg``: the PostgreSQL whose CPU counts for a peer that keeps its state there."""
    name = name or peer.name
    urls = peer.ff_urls()
    before, _ = peer.finished()
    warm = drive(
        urls,
        plan.concurrency,
        plan.phase_seconds,
        limit=plan.ff_warmup_runs,
        ok=ACCEPTED,
        timeout=60,
    )
    settle(peer, before, len(warm["latencies"]), plan.phase_seconds)
    errors = warm["errors"]
    postmaster = [postmaster_pid(pg)] if pg is not None and peer.uses_pg else []
    for runs in plan.ff_runs:
        before, _ = peer.finished()
        cpu0 = cpu_seconds(peer.pids() + postmaster)
        roles0 = role_cpu(peer, postmaster)
        started = time.time()
        sent = drive(
            urls, plan.concurrency, plan.phase_seconds, limit=runs, ok=ACCEPTED, timeout=60
        )
        accepted = len(sent["latencies"])
        ended, last = settle(peer, before, accepted, plan.phase_seconds)
        cpu1 = cpu_seconds(peer.pids() + postmaster)
        roles1 = role_cpu(peer, postmaster)
        errors += sent["errors"]
        rates = ff_rates(accepted, sent["elapsed"], ended, started, last)
        out.add(name, f"ff_accepted_per_s_{runs}", rates["accepted_per_s"], "starts/s")
        out.add(name, f"ff_runs_per_s_{runs}", rates["completed_per_s"], "runs/s")
        out.add(name, f"ff_not_completed_{runs}", rates["not_completed"], "runs")
        figures = latency_figures(sent["latencies"])
        out.add(name, f"ff_accept_median_{runs}", figures["latency_median"], "ms")
        out.add(name, f"ff_accept_p95_{runs}", figures["latency_p95"], "ms")
        out.add(name, f"ff_cpu_per_run_{runs}", per_run(cpu1 - cpu0, ended, 1000), "ms")
        for role, spent in roles1.items():
            used = per_run(spent - roles0.get(role, 0.0), ended, 1000)
            out.add(name, f"ff_cpu_per_run_{role}_{runs}", used, "ms")
    out.add(name, "ff_errors", errors, "requests")
    if isinstance(peer, Railyard) and pg is not None:
        intake(peer, pg, plan, out)
    if plan.profile_runs and isinstance(peer, Railyard) and plan.profile_dir is not None:
        profile(peer, plan, plan.profile_dir)
