"""Prometheus metrics of one Railyard process (prometheus-client, the default registry).

Every process keeps its own counters and serves them itself: ``railyard api`` (and
``railyard dev``) at ``GET /metrics``, ``railyard worker`` and ``railyard scheduler`` at
``/metrics`` on their ``--health-port``. Prometheus scrapes each process and tells them
apart by its ``instance`` label, so nothing is shared between processes (no multiprocess
directory to clean up). The gauges that describe the whole installation (queue depth, live
workers) are computed by the API process at scrape time
(:mod:`backend.services.operations.metrics_view`),
so they are served once.

Series (documented in docs/operations.md, "Metrics"); durations in seconds:

- ``railyard_runs_started_total{workflow,trigger}`` and
  ``railyard_runs_finished_total{workflow,status}``: counters; ``workflow`` is the
  workflow id.
- ``railyard_run_duration_seconds{status}``: histogram, run start to end.
- ``railyard_step_duration_seconds{status}``: histogram, a step's start to its end
  (``succeeded``/``failed``).
- ``railyard_dispatch_latency_seconds{job}``: histogram, a job's due time to its start on
  a worker (``job`` is ``execute_step`` or ``advance_run``).
- ``railyard_queue_depth``, ``railyard_queue_oldest_age_seconds``, ``railyard_ready_steps``,
  ``railyard_workers``: gauges (API process).
- ``railyard_webhook_requests_total{status}``: counter of ``/hooks/...`` answers.
- ``railyard_schedule_lag_seconds{catch_up}``: histogram, a fire instant to its run start.
- ``railyard_http_request_duration_seconds{method,route,status}``: histogram; ``route`` is
  the route template (``/api/runs/{run_id}``), ``unmatched`` for unknown paths.
- ``railyard_db_pool_connections{pool,state}``: gauge, ``state`` one of ``checked_out``,
  ``idle``, ``overflow``; and ``railyard_db_pool_size{pool}``.
- ``railyard_retention_deleted_total{data_class}``: counter of rows retention removed.
- ``railyard_scheduler_leader{scheduler}``: gauge, 1 while the scheduler process
  ``scheduler`` (``<host>:<pid>``) holds the leader lock, 0 while it stands by; served by
  scheduler processes only (``sum(railyard_scheduler_leader)`` is 1 with a leader).
- ``railyard_gc_pause_seconds{generation}``: histogram of the cyclic garbage collector's
  pauses, in processes that tuned it (:mod:`backend.observability.gc_pauses`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""Media type of :func:`exposition` (the Prometheus text format 0.0.4)."""

# Buckets in seconds: from a fast inline step (milliseconds) to hour-long runs.
RUN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, float("inf"))
STEP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

RUNS_STARTED = Counter(
    "railyard_runs_started", "Runs created, by workflow id and trigger.", ["workflow", "trigger"]
)
RUNS_FINISHED = Counter(
    "railyard_runs_finished", "Runs that reached an end state.", ["workflow", "status"]
)
RUN_DURATION = Histogram(
    "railyard_run_duration_seconds",
    "Run duration from start to end.",
    ["status"],
    buckets=RUN_BUCKETS,
)
STEP_DURATION = Histogram(
    "railyard_step_duration_seconds",
    "Step duration from its start to its end.",
    ["status"],
    buckets=STEP_BUCKETS,
)
DISPATCH_LATENCY = Histogram(
    "railyard_dispatch_latency_seconds",
    "Time from a job's due time to its start on a worker.",
    ["job"],
    buckets=LATENCY_BUCKETS,
)
WEBHOOK_REQUESTS = Counter(
    "railyard_webhook_requests", "Webhook requests answered, by status code.", ["status"]
)
SCHEDULE_LAG = Histogram(
    "railyard_schedule_lag_seconds",
    "Time from a schedule's fire instant to the start of its run.",
    ["catch_up"],
    buckets=(*LATENCY_BUCKETS, 30, 60, 300, 3600),
)
TRIGGER_EVENTS = Counter(
    "railyard_trigger_events",
    "Events connector triggers stored in the inbox, by trigger kind and node type.",
    ["kind", "node_type"],
)
TRIGGER_DUPLICATES = Counter(
    "railyard_trigger_duplicates",
    "Events a connector trigger heard again (redelivered, retried, re-polled) and dropped.",
    ["kind", "node_type"],
)
TRIGGER_REFUSED = Counter(
    "railyard_trigger_deliveries_refused",
    "App webhook deliveries refused (no run), by reason: signature, replay, payload, size, "
    "method, unknown, disabled, error.",
    ["reason"],
)
TRIGGER_DEAD_LETTERS = Counter(
    "railyard_trigger_dead_letters",
    "Messages listening triggers could not turn into events, kept as dead letters.",
    ["node_type"],
)
TRIGGER_FAILURES = Counter(
    "railyard_trigger_failures",
    "Failed polls, registrations and subscriptions of connector triggers.",
    ["kind", "node_type"],
)
POLL_LAG = Histogram(
    "railyard_trigger_poll_lag_seconds",
    "Time from a polling trigger's due time to the start of its poll.",
    buckets=(*LATENCY_BUCKETS, 30, 60, 300),
)
HTTP_DURATION = Histogram(
    "railyard_http_request_duration_seconds",
    "HTTP request duration in the API, by route template.",
    ["method", "route", "status"],
    buckets=LATENCY_BUCKETS,
)
RETENTION_DELETED = Counter(
    "railyard_retention_deleted", "Rows removed (or cleared) by retention.", ["data_class"]
)
SCHEDULER_LEADER = Gauge(
    "railyard_scheduler_leader",
    "1 while this scheduler process holds the leader lock, 0 while it stands by.",
    ["scheduler"],
)
INSTALLATION = CollectorRegistry(auto_describe=True)
"""Gauges about the whole installation, set by the API process at each scrape and served
only there (a worker would report them as zero)."""
QUEUE_DEPTH = Gauge(
    "railyard_queue_depth",
    "Jobs due in the job queue and not started yet.",
    registry=INSTALLATION,
)
QUEUE_OLDEST_AGE = Gauge(
    "railyard_queue_oldest_age_seconds",
    "How long the oldest due job has waited (0 if none).",
    registry=INSTALLATION,
)
READY_STEPS = Gauge(
    "railyard_ready_steps",
    "Steps ready to run now in PostgreSQL (the truth).",
    registry=INSTALLATION,
)
WORKERS = Gauge(
    "railyard_workers",
    "Workers that sent a heartbeat within its expiry.",
    registry=INSTALLATION,
)

_END_STATES = frozenset({"succeeded", "failed", "cancelled", "timed_out"})
_STEP_ENDS = {"step.succeeded": "succeeded", "step.failed": "failed"}


class _RunState(Protocol):
    workflow_id: str
    started_at: datetime | None
    finished_at: datetime | None
    events: list[Any]
    steps: dict[str, Any]


_children: dict[tuple[Any, ...], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, cached: the hot path (every step, every request) skips
    prometheus-client's label validation and lock after the first use."""
    key = (id(metric), *labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*labels)
    return child


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def run_started(workflow_id: object, trigger: str) -> None:
    """Count one new run of ``workflow_id`` started by ``trigger``."""
    _child(RUNS_STARTED, str(workflow_id), trigger).inc()


def engine_events(state: _RunState) -> None:
    """Record what the engine's outbox batch of ``state`` says (call it once the batch is
    written, before the batch is cleared): a run's end (counter and duration) and each
    step's end (duration). Cheap: one pass over the batch, nothing for other events."""
    for event in state.events:
        kind = event.kind
        if kind in _STEP_ENDS:
            step = state.steps.get(event.step_id) if event.step_id else None
            took = _seconds(step.started_at, step.finished_at) if step is not None else None
            if took is not None:
                _child(STEP_DURATION, _STEP_ENDS[kind]).observe(took)
        elif kind.startswith("run.") and kind[4:] in _END_STATES:
            status = kind[4:]
            _child(RUNS_FINISHED, state.workflow_id, status).inc()
            took = _seconds(state.started_at, state.finished_at)
            if took is not None:
                _child(RUN_DURATION, status).observe(took)


def dispatch_latency(job: str, seconds: float) -> None:
    """Observe how long job ``job`` waited past its due time (negative clamps to 0)."""
    _child(DISPATCH_LATENCY, job).observe(max(0.0, seconds))


def schedule_lag(seconds: float, *, catch_up: bool) -> None:
    """Observe how late a schedule fire started its run."""
    SCHEDULE_LAG.labels("true" if catch_up else "false").observe(max(0.0, seconds))


def trigger_events(kind: str, node_type: str, stored: int, duplicates: int) -> None:
    """Count events a trigger stored and the duplicates it dropped."""
    if stored:
        _child(TRIGGER_EVENTS, kind, node_type).inc(stored)
    if duplicates:
        _child(TRIGGER_DUPLICATES, kind, node_type).inc(duplicates)


def trigger_refused(reason: str) -> None:
    """Count one refused app webhook delivery."""
    _child(TRIGGER_REFUSED, reason).inc()


def trigger_dead_letter(node_type: str) -> None:
    """Count one dead letter."""
    _child(TRIGGER_DEAD_LETTERS, node_type).inc()


def trigger_failure(kind: str, node_type: str) -> None:
    """Count one failed poll, registration or subscription."""
    _child(TRIGGER_FAILURES, kind, node_type).inc()


def poll_lag(seconds: float) -> None:
    """Observe how late a poll started."""
    POLL_LAG.observe(max(0.0, seconds))


def http_request(method: str, route: str, status: int, seconds: float) -> None:
    """Observe one API request; webhook answers (``/hooks/...``) are also counted."""
    code = str(status)
    _child(HTTP_DURATION, method, route, code).observe(seconds)
    if route.startswith("/hooks"):
        _child(WEBHOOK_REQUESTS, code).inc()


def scheduler_leader(scheduler: str, leads: bool) -> None:
    """Say whether scheduler process ``scheduler`` (``<host>:<pid>``) leads."""
    SCHEDULER_LEADER.labels(scheduler).set(1 if leads else 0)


def retention_deleted(data_class: str, count: int) -> None:
    """Count ``count`` rows retention removed from ``data_class``."""
    if count:
        RETENTION_DELETED.labels(data_class).inc(count)


class PoolCollector(Collector):
    """Collects ``railyard_db_pool_*`` from the SQLAlchemy pools registered with
    :meth:`watch` (held weakly: a disposed runtime's pool disappears on its own)."""

    def __init__(self) -> None:
        self._pools: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()

    def watch(self, name: str, pool: Any) -> None:
        """Report ``pool`` (a SQLAlchemy ``QueuePool``; other kinds are skipped at
        collection) under ``pool="<name>"`` (a second pool of one name gets ``-2``...)."""
        key, n = name, 1
        while key in self._pools and self._pools[key] is not pool:
            n += 1
            key = f"{name}-{n}"
        self._pools[key] = pool

    def collect(self) -> Iterator[Metric]:
        """Yield the current connection counts of every watched pool."""
        conns = GaugeMetricFamily(
            "railyard_db_pool_connections",
            "Database pool connections by state.",
            labels=["pool", "state"],
        )
        size = GaugeMetricFamily(
            "railyard_db_pool_size", "Configured size of the database pool.", labels=["pool"]
        )
        for name, pool in list(self._pools.items()):
            try:
                out, idle, over, sz = (
                    pool.checkedout(),
                    pool.checkedin(),
                    pool.overflow(),
                    pool.size(),
                )
            except (AttributeError, TypeError):  # a pool kind without counters (NullPool)
                continue
            conns.add_metric([name, "checked_out"], out)
            conns.add_metric([name, "idle"], idle)
            conns.add_metric([name, "overflow"], max(0, over))
            size.add_metric([name], sz)
        yield conns
        yield size

    def describe(self) -> Iterable[Metric]:
        """No fixed description (collected at each scrape)."""
        return []


POOLS = PoolCollector()
REGISTRY.register(POOLS)


def exposition(*, installation: bool = False) -> bytes:
    """This process's metrics in the Prometheus text format (:data:`CONTENT_TYPE`), with
    the installation gauges when ``installation`` (the API process, after setting them)."""
    text = generate_latest(REGISTRY)
    return text + generate_latest(INSTALLATION) if installation else text
