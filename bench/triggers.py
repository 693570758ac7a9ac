"""Connector triggers, measured the production way: broker events to stored runs, and the
lag of polling triggers.

Starts the bench stack (bench/cluster.py: embedded PostgreSQL with durable settings, Redis,
migrated) and the brokers from their Debian packages on 127.0.0.1 (a second Redis with its
append-only file for Redis Streams, RabbitMQ, Mosquitto without its limit of 1,000
messages queued per client (which would drop most of a burst), nats-server with
JetStream; the same server classes the broker tests start), publishes one workflow per
broker (``<broker> message received -> Set``), then runs one ``railyard events`` process
(no API) and ``--workers`` (2) ``railyard worker`` processes.

Throughput, one broker after the other: one warm-up message (its run waited for), then
``--events`` (5,000) messages published as fast as the broker takes them, each with its
own id; the figure is messages per second from the first publish to the last run stored
(``runs`` rows of the workflow, counted every 50 ms). The publisher is faster than the
subscription, so the figure is the subscription's: read, store the event, start its run,
ack.

Poll lag: ``--polls`` (300) workflows with ``http.new_items`` polling a local vendor (a new
item every 10 s per feed) at the trigger's floor interval (30 s), run by one ``railyard
scheduler``; after the first poll of each (the baseline), ``--poll-seconds`` (65) of
polling, and the p50/p95/p99 of ``railyard_trigger_poll_lag_seconds`` over that window
(the scheduler's /metrics, quantiles interpolated within the histogram's buckets as
PromQL's ``histogram_quantile`` does), and the polls and runs it made.

Figures: ``trigger_<broker>_events_per_second``, ``trigger_<broker>_events``,
``trigger_<broker>_pg_commits_per_event``, ``trigger_<broker>_events_cpu_per_event``
(ms), ``trigger_poll_lag_p50/p95/p99`` (s), ``trigger_polls``, ``trigger_poll_runs``,
``trigger_poll_interval`` (s) and the 1-minute load average after each phase
(``trigger_<broker>_load_average``, ``trigger_poll_load_average``) and at the end.
``--quick``: 1,000 events per broker and 40 polling subscriptions. Bounded: every phase
stops after its own time limit.

The brokers and their bursts are in bench/trigger_parts/brokers.py, the polling phase in
bench/trigger_parts/polls.py, the workflows both publish in bench/trigger_parts/workflows.py.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import Stack  # noqa: E402
from bench.common import figure, load_average, pg_counters  # noqa: E402
from bench.trigger_parts.brokers import BROKERS, Broker, burst, start_brokers, stop_servers  # noqa: E402
from bench.trigger_parts.polls import poll_lag  # noqa: E402
from bench.trigger_parts.workflows import diagram, publish_workflows  # noqa: E402


def throughput(
    stack: Stack,
    names: list[str],
    events: int,
    workers: int,
    concurrency: int,
    profile: Path | None = None,
) -> None:
    """The broker phase (see the module doc)."""
    brokers, servers = start_brokers(stack.data / "brokers", names, concurrency)
    try:
        for broker in brokers:
            asyncio.run(broker.prepare())
        ids = asyncio.run(
            publish_workflows(stack.env, [diagram(b.trigger, b.config()) for b in brokers])
        )
        for _ in range(workers):
            stack.worker()
        events_proc = stack.spawn("events", "events")
        for broker, workflow_id in zip(brokers, ids, strict=True):
            label = f"{broker.name}{time.time_ns()}"
            commits0 = asyncio.run(pg_counters(stack.pg.url))[0]
            rate, runs, cpu = asyncio.run(
                burst(broker, workflow_id, stack.pg.dsn, events, label, events_proc.pid)
            )
            time.sleep(1.0)  # the statistics collector flushes at most once a second
            commits = asyncio.run(pg_counters(stack.pg.url))[0] - commits0
            figure(f"trigger_{broker.name}_events_per_second", rate, "events/s")
            figure(f"trigger_{broker.name}_events", runs, "runs")
            figure(f"trigger_{broker.name}_pg_commits_per_event", commits / max(1, runs), "xact")
            figure(f"trigger_{broker.name}_events_cpu_per_event", cpu / max(1, runs) * 1000, "ms")
            figure(f"trigger_{broker.name}_load_average", load_average(), "")
            if profile is not None:
                profiled(broker, workflow_id, stack, events_proc.pid, events, profile)
    finally:
        stop_servers(servers)


def profiled(
    broker: Broker, workflow_id: str, stack: Stack, pid: int, events: int, where: Path
) -> None:
    """One more burst (not in the figures: the sampler takes CPU too) with py-spy on the
    events process (bench/peers/profile.py); prints its ``# profile`` table."""
    from bench.peers.profile import Sampler, report

    sampler = Sampler(where)
    sampler.attach(f"events-{broker.name}", pid)
    time.sleep(1.0)  # py-spy attached
    label = f"{broker.name}-profiled{time.time_ns()}"
    asyncio.run(burst(broker, workflow_id, stack.pg.dsn, events, label, pid))
    for name, summary in sampler.detach().items():
        for line in report(name, summary):
            print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5000, help="messages per broker")
    parser.add_argument("--brokers", default=",".join(BROKERS), help="comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=100,
        help="the triggers' 'Messages stored at once' (1 to 100; MQTT is always 1)",
    )
    parser.add_argument("--polls", type=int, default=300, help="polling subscriptions")
    parser.add_argument("--poll-seconds", type=float, default=65.0)
    parser.add_argument("--skip-polls", action="store_true")
    parser.add_argument("--skip-brokers", action="store_true")
    parser.add_argument("--quick", action="store_true", help="1,000 events, 40 subscriptions")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs directory")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        help="after each broker's burst, one more with py-spy on the events process",
    )
    args = parser.parse_args()
    if args.quick:
        args.events, args.polls, args.poll_seconds = 1000, 40, 35.0
    names = [n for n in args.brokers.split(",") if n]
    unknown = set(names) - set(BROKERS)
    if unknown:
        parser.error(f"unknown brokers: {', '.join(sorted(unknown))}")
    env = {"RAILYARD_HTTP_ALLOW_PRIVATE": "1"}
    with Stack("railyard-bench-triggers-", env=env, keep=args.keep) as stack:
        print(f"data and logs: {stack.data}", flush=True)
        if not args.skip_brokers:
            throughput(stack, names, args.events, args.workers, args.concurrency, args.profile)
        if not args.skip_polls:
            poll_lag(stack, args.polls, args.poll_seconds, args.profile)
        figure("trigger_load_average", load_average(), "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
