"""Railyard side by side with Restate, DBOS Transact and Node-RED on the same machine.

One command from the repository root: ``python bench/peers/run.py`` (or ``make
bench-peers``). It installs the peers once into the git-ignored ``.bench-peers/``
(bench/peers/install.py; ``--skip-install`` only checks they are there), starts one embedded
PostgreSQL with PostgreSQL's durable defaults (fsync on) in a temporary directory, and for
``--rounds`` rounds runs, engine after engine in an order rotated each round:

- the 3-step scenario (Railyard, DBOS, Restate): 20 warm-up requests, ``--runs`` sequential
  runs (latency median/p95/p99), then ``--throughput`` runs (200 and 1,000) started as fast
  as ``--concurrency`` keep-alive connections allow: runs/s, and over the largest phase the
  engine's CPU per run (its processes' user + system time; PostgreSQL's postmaster and
  backends added for Railyard and DBOS) and PostgreSQL write transactions per run;
- Webhook -> Set -> If (Node-RED, Railyard): ``--setif-seconds`` of load on
  ``--setif-connections`` connections: completed runs/s and p99 latency;
- the fire-and-forget shape (every engine, Node-RED as the non-durable reference):
  ``--ff-runs`` runs of the 3-step scenario started at once without waiting, their ends
  counted where each engine records them (bench/peers/fire_and_forget.py): accepted
  starts/s and completed runs/s; then, for Railyard, the same starts with its workers
  frozen (its intake alone, the ceiling of its accepted starts), in a table beside each
  engine's accepted starts while executing;
- ``pgbench -N`` with 8 clients on the same PostgreSQL, the commit ceiling.

``--shapes`` picks the shapes of the 3-step scenario: ``waiting`` (the caller waits for
each run's answer), ``ff`` (fire and forget), both by default.

Prints ``figure: <engine>.<name> = <min>/<median>/<max> <unit>`` over the rounds, the load
average before and after, and the versions. Bounded: every phase stops after its requests or
``--phase-seconds``; servers listen on 127.0.0.1 only; all processes are stopped at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.cluster import Stack
from bench.common import load_average, pgbench_tps
from bench.peers import install
from bench.peers.engines import Dbos, NodeRed, Peer, Restate
from bench.peers.fire_and_forget import fire_and_forget
from bench.peers.railyard_peer import Railyard
from bench.peers.scenario import Plan, set_if_node_red, set_if_railyard, three_steps
from bench.peers.stats import (
    Rounds,
    ceiling_share,
    ff_table,
    goal_table,
    intake_table,
    markdown_table,
)

ENGINES = ("railyard", "dbos", "restate")
SHAPES = ("waiting", "ff")


def rotated(items: list[Any], round_no: int) -> list[Any]:
    """``items`` starting at position ``round_no`` (mod their number): interleaved rounds
    where no engine always goes first."""
    if not items:
        return []
    k = round_no % len(items)
    return items[k:] + items[:k]


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=100, help="sequential runs for latency")
    parser.add_argument(
        "--throughput",
        default="200,1000",
        help="comma-separated run counts started as fast as possible",
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--ff-warmup",
        type=int,
        default=200,
        help="fire-and-forget warm-up starts at --concurrency, waited to their ends",
    )
    parser.add_argument("--shapes", default=",".join(SHAPES), help="waiting, ff or both")
    parser.add_argument(
        "--ff-runs",
        default="1000",
        help="comma-separated run counts of the fire-and-forget shape",
    )
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--api-procs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dbos-procs", type=int, default=2)
    parser.add_argument("--setif-seconds", type=float, default=10.0)
    parser.add_argument("--setif-connections", type=int, default=16)
    parser.add_argument("--skip-setif", action="store_true", help="no Node-RED comparison")
    parser.add_argument("--pgbench-seconds", type=float, default=5.0)
    parser.add_argument("--phase-seconds", type=float, default=300.0)
    parser.add_argument("--skip-install", action="store_true")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="RUNS",
        help="after round 1's Railyard phases, RUNS more runs sampled with py-spy",
    )
    parser.add_argument("--keep", action="store_true", help="keep the data directory and logs")
    args = parser.parse_args(argv)
    unknown = set(args.engines.split(",")) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))} (known: {ENGINES})")
    shapes = set(args.shapes.split(","))
    if not shapes or shapes - set(SHAPES):
        parser.error(f"unknown shapes: {args.shapes} (known: {SHAPES})")
    return args


def play(args: argparse.Namespace, plan: Plan, stack: Stack, out: Rounds) -> None:
    """Every round of the scenarios on ``stack`` (its PostgreSQL shared by the peers that
    keep their state there, its Redis Railyard's), each figure added to ``out``."""
    data, pg = stack.data, stack.pg
    railyard = Railyard(stack, api_procs=args.api_procs, workers=args.workers)
    peers: dict[str, Peer] = {
        "railyard": railyard,
        "dbos": Dbos(data, pg, processes=args.dbos_procs),
        "restate": Restate(data),
    }
    node_red = NodeRed(data)
    railyard.prepare()
    chosen = [peers[name] for name in args.engines.split(",")]
    shapes = args.shapes.split(",")
    for r in range(args.rounds):
        for peer in rotated(chosen, r):
            print(f"# round {r + 1}: {peer.name} 3-step ({', '.join(shapes)})", flush=True)
            plan.profile_runs = args.profile if r == 0 else 0
            peer.start()
            try:
                if "waiting" in shapes:
                    three_steps(peer, pg, plan, out)
                if "ff" in shapes:
                    fire_and_forget(peer, pg, plan, out)
            finally:
                peer.stop()
        if not args.skip_setif:
            for which in rotated(["node-red", "railyard"], r):
                print(f"# round {r + 1}: {which} webhook -> set -> if", flush=True)
                one: Peer = node_red if which == "node-red" else railyard
                one.start()
                try:
                    if which == "node-red":
                        set_if_node_red(node_red, plan, out)
                        if "ff" in shapes:  # the non-durable reference of the shape
                            fire_and_forget(node_red, None, plan, out, "ff.node-red")
                    else:
                        set_if_railyard(railyard, plan, out)
                finally:
                    one.stop()
        tps = pgbench_tps(pg.port, pg.user, plan.pgbench_clients, plan.pgbench_seconds)
        out.add("postgres", "pgbench_N_8_clients", tps, "tps")
        largest = max(plan.throughput_runs, default=0)
        for peer in chosen:
            if peer.uses_pg:
                rate = out.last(peer.name, f"runs_per_s_{largest}")
                xacts = out.last(peer.name, "pg_write_xacts_per_run")
                out.add(peer.name, "pg_ceiling_used", ceiling_share(rate, xacts, tps), "%")


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    install.ensure(args.skip_install)
    plan = Plan(
        latency_runs=args.runs,
        throughput_runs=tuple(int(n) for n in args.throughput.split(",") if n),
        ff_runs=tuple(int(n) for n in args.ff_runs.split(",") if n),
        concurrency=args.concurrency,
        ff_warmup_runs=args.ff_warmup,
        phase_seconds=args.phase_seconds,
        setif_seconds=args.setif_seconds,
        setif_connections=args.setif_connections,
        pgbench_seconds=args.pgbench_seconds,
    )
    print(f"# load average before: {load_average():.2f}", flush=True)
    out = Rounds()
    started = time.monotonic()
    with Stack("railyard-peers-", keep=args.keep) as stack:
        print(f"# peers: data and logs in {stack.data}", flush=True)
        plan.profile_dir = stack.data / "profile"
        play(args, plan, stack, out)
    for line in out.lines():
        print(line, flush=True)
    largest = max(plan.throughput_runs, default=0)
    for line in markdown_table(out, args.engines.split(","), largest):
        print(f"# {line}", flush=True)
    if "ff" in args.shapes.split(","):
        ff_engines = args.engines.split(",") + ([] if args.skip_setif else ["ff.node-red"])
        for line in ff_table(out, ff_engines, max(plan.ff_runs, default=0)):
            print(f"# {line}", flush=True)
    if "railyard" in args.engines.split(",") and "restate" in args.engines.split(","):
        if "ff" in args.shapes.split(","):
            for line in intake_table(out, max(plan.ff_runs, default=0)):
                print(f"# {line}", flush=True)
        for line in goal_table(out, largest, max(plan.ff_runs, default=0)):
            print(f"# {line}", flush=True)
    print(f"# load average after: {load_average():.2f}", flush=True)
    print(f"# wall time: {time.monotonic() - started:.0f} s", flush=True)
    print(f"# versions: {install.versions()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
