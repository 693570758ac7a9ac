"""docs/operations.md, deploy/compose.yaml and the Kubernetes manifests tell one story:
drain periods and pool sizes agree between the three, and the production overlay's
PostgreSQL connection budget holds at the most replicas it can scale to (docs/operations.md,
"Drain periods" and "Sizing")."""

from __future__ import annotations

import re
from typing import Any

import pytest

from backend.cli import EVENTS_POOL, SCHEDULER_POOL
from backend.db.engine import MAX_OVERFLOW
from backend.settings import Settings
from backend.workers.worker import DEFAULT_MAX_JOBS
from tests.unit.deploy_files import (
    RENDERS,
    ROOT,
    compose_services,
    migrate_job,
    resources_of,
    seconds,
)

DOCS = ROOT / "docs" / "operations.md"
PROCESSES = ("api", "worker", "scheduler", "events")

TOOLS_CONNECTIONS = 10
"""Connections docs/operations.md keeps for tools, the operator's instance manager and
people's own sessions."""

SUPERUSER_RESERVED = 3
"""PostgreSQL's default ``superuser_reserved_connections``: slots ordinary roles never get."""


def _docs_drain_table() -> dict[str, tuple[float | None, float | None, float]]:
    """docs' "Drain periods" table: process -> (delay, grace, time to stop), seconds."""
    text = DOCS.read_text()
    section = text[text.index("### Drain periods") :]
    cell = r"\s*([\d.]*)\s*\|"
    rows = re.findall(rf"^\| `railyard (\w+)` \|{cell}{cell}{cell}$", section, re.M)
    table = {
        name: (float(delay) if delay else None, float(grace) if grace else None, float(stop))
        for name, delay, grace, stop in rows
    }
    assert set(table) == set(PROCESSES), table
    return table


def _compose_drain() -> dict[str, tuple[float | None, float | None, float]]:
    services = compose_services()
    drain = {}
    for name in PROCESSES:
        env = services[name]["environment"]
        delay, grace = env.get("RAILYARD_SHUTDOWN_DELAY"), env.get("RAILYARD_SHUTDOWN_GRACE")
        drain[name] = (
            float(delay) if delay and name == "api" else None,
            float(grace) if grace and name in ("api", "worker") else None,
            seconds(services[name]["stop_grace_period"]),
        )
    return drain


def _kubernetes_drain(overlay: str) -> dict[str, tuple[float | None, float | None, float]]:
    resources = resources_of(overlay)
    config = next(doc for (kind, _), doc in resources.items() if kind == "ConfigMap")["data"]
    drain = {}
    for name in PROCESSES:
        pod = resources[("Deployment", f"railyard-{name}")]["spec"]["template"]["spec"]
        delay, grace = config.get("RAILYARD_SHUTDOWN_DELAY"), config.get("RAILYARD_SHUTDOWN_GRACE")
        drain[name] = (
            float(delay) if delay and name == "api" else None,
            float(grace) if grace and name in ("api", "worker") else None,
            float(pod["terminationGracePeriodSeconds"]),
        )
    return drain


@pytest.mark.parametrize("overlay", RENDERS)
def test_drain_periods_agree_in_docs_compose_and_kubernetes(overlay: str) -> None:
    docs = _docs_drain_table()
    assert _compose_drain() == docs
    assert _kubernetes_drain(overlay) == docs


def _docs_connections_per_process() -> dict[str, int]:
    """The coefficients of docs' ``max_connections`` formula, per process kind."""
    text = DOCS.read_text()
    match = re.search(
        r"(\d+) x API processes \+ (\d+) x workers \+ (\d+) x schedulers \+ (\d+) x events"
        r" processes \+ (\d+) \(tools",
        text,
    )
    assert match, "docs/operations.md lost its max_connections formula"
    api, worker, scheduler, events, tools = (int(g) for g in match.groups())
    assert tools == TOOLS_CONNECTIONS
    return {"api": api, "worker": worker, "scheduler": scheduler, "events": events}


def _pool_sizes(env: dict[str, Any], worker_args: list[str]) -> dict[str, int]:
    """Each process's pool + overflow, with the settings ``env`` and the worker's
    ``worker_args`` give (the code's defaults otherwise)."""
    api = int(env.get("RAILYARD_API_DB_POOL_SIZE", Settings().api_db_pool_size))
    jobs = (
        int(worker_args[worker_args.index("--max-jobs") + 1])
        if "--max-jobs" in worker_args
        else DEFAULT_MAX_JOBS
    )
    return {
        "api": api + MAX_OVERFLOW,
        "worker": jobs + MAX_OVERFLOW,
        "scheduler": SCHEDULER_POOL + MAX_OVERFLOW,
        "events": EVENTS_POOL + MAX_OVERFLOW,
    }


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


@pytest.mark.parametrize("overlay", RENDERS)
def test_pool_sizes_agree_in_docs_compose_and_kubernetes(overlay: str) -> None:
    docs = _docs_connections_per_process()
    services = compose_services()
    compose_env = {**services["api"]["environment"], **services["worker"]["environment"]}
    assert _pool_sizes(compose_env, services["worker"].get("command", [])) == docs
    resources = resources_of(overlay)
    config = next(doc for (kind, _), doc in resources.items() if kind == "ConfigMap")["data"]
    containers = {
        name: resources[("Deployment", f"railyard-{name}")]["spec"]["template"]["spec"][
            "containers"
        ][0]
        for name in PROCESSES
    }
    env = {**config, **_env(containers["api"])}
    assert _pool_sizes(env, containers["worker"]["args"]) == docs


def _max_replicas(resources: dict[tuple[str, str], dict[str, Any]], name: str) -> int:
    """The most pods of Deployment ``name`` an autoscaler may run (its replicas without one)."""
    for (kind, _), doc in resources.items():
        if kind == "ScaledObject" and doc["spec"]["scaleTargetRef"]["name"] == name:
            return int(doc["spec"]["maxReplicaCount"])
        if kind == "HorizontalPodAutoscaler" and doc["spec"]["scaleTargetRef"]["name"] == name:
            return int(doc["spec"]["maxReplicas"])
    return int(resources[("Deployment", name)]["spec"]["replicas"])


@pytest.mark.parametrize("source", ["production", "helm-operators"])
def test_production_connection_budget_holds_at_the_most_replicas(source: str) -> None:
    """Pooled processes (API, workers, events) reach PostgreSQL through the transaction
    Pooler, the schedulers and the migration directly; at every Deployment's maximum the
    Pooler takes every client and PostgreSQL every server connection (docs' figures)."""
    resources = resources_of(source)
    per_process = _docs_connections_per_process()
    pooler = resources[("Pooler", "railyard-pg-pooler-rw")]["spec"]
    cluster = resources[("Cluster", "railyard-pg")]["spec"]
    assert pooler["pgbouncer"]["poolMode"] == "transaction"
    assert pooler["cluster"]["name"] == "railyard-pg" and pooler["type"] == "rw"
    pooled, direct = ("api", "worker", "events"), ("scheduler",)
    for name in pooled:
        container = resources[("Deployment", f"railyard-{name}")]["spec"]["template"]["spec"][
            "containers"
        ][0]
        assert "@railyard-pg-pooler-rw:5432/" in _env(container)["DATABASE_URL"], name
    for workload in (resources[("Deployment", "railyard-scheduler")], migrate_job(resources)):
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        (url,) = [e for e in container["env"] if e["name"] == "DATABASE_URL"]
        # CloudNativePG's application Secret: its `uri` names the `-rw` Service
        assert url["valueFrom"]["secretKeyRef"] == {"name": "railyard-pg-app", "key": "uri"}

    clients = sum(
        per_process[name] * _max_replicas(resources, f"railyard-{name}") for name in pooled
    )
    params = pooler["pgbouncer"]["parameters"]
    assert clients <= int(params["max_client_conn"]), clients
    servers = (
        int(pooler["instances"]) * int(params["default_pool_size"])
        + sum(per_process[name] * _max_replicas(resources, f"railyard-{name}") for name in direct)
        + 1  # railyard migrate
        + TOOLS_CONNECTIONS
    )
    max_connections = int(cluster["postgresql"]["parameters"]["max_connections"])
    assert servers <= max_connections - SUPERUSER_RESERVED, servers
    text = DOCS.read_text()
    assert f"= **{clients:,}**" in text and f"= **{servers:,}**" in text, (clients, servers)
