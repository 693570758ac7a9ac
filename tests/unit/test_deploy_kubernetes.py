"""The Kubernetes manifests, rendered and validated offline.

Each overlay under deploy/kubernetes/overlays is rendered by kustomize (``kubectl kustomize``,
or a standalone ``kustomize``), then checked three ways: yamllint on the sources,
kubernetes-validate (the resources against Kubernetes' OpenAPI schemas, strict), and checkov
(misconfigurations: non-root, probes, limits, capabilities, ...; from the checkov
virtualenv the Makefile makes), plus the structural rules of docs/operations.md,
"Kubernetes" that no generic tool knows.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from backend.observability.metrics import QUEUE_DEPTH
from backend.workers.worker import DEFAULT_MAX_JOBS
from tests.unit.deploy_files import (
    RENDERS,
    ROOT,
    migrate_job,
    render_text,
    rendered,
    resources_of,
    run,
)

SCHEMAS = ROOT / "deploy" / "kubernetes" / "schemas"
PRODUCTION = ("production", "helm-operators")
"""The production overlay and the chart with the same choices."""
BIN = Path(sys.executable).parent
CHECKOV = Path(os.environ.get("RAILYARD_CHECKOV", ROOT / ".venv" / "checkov" / "bin" / "checkov"))


def _write(tmp_path: Path, overlay: str) -> Path:
    path = tmp_path / f"{overlay}.yaml"
    path.write_text(render_text(overlay))
    return path


def test_sources_pass_yamllint() -> None:
    config = ROOT / "deploy" / ".yamllint"
    result = run([str(BIN / "yamllint"), "-s", "-c", str(config), str(ROOT / "deploy")])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("overlay", RENDERS)
def test_overlay_renders_and_matches_the_kubernetes_schemas(overlay: str, tmp_path: Path) -> None:
    path = _write(tmp_path, overlay)
    result = run([str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
    # The operators' kinds have no schema there: the only warnings allowed are about
    # them, and each is validated against its operator's CRD schema instead (below).
    for line in (result.stdout + result.stderr).splitlines():
        version = re.search(r"api version (\S+) for", line)
        assert version and (SCHEMAS / version[1].rpartition("/")[0]).is_dir(), line


def crd_schema_errors(docs: list[dict[str, Any]]) -> list[str]:
    """Each resource of an operator's kind against its CRD's JSON Schema
    (deploy/kubernetes/schemas, strict); the errors, or a missing schema, as text."""
    errors = []
    for doc in docs:
        group, _, version = doc["apiVersion"].rpartition("/")
        if not group or "." not in group or group.endswith(".k8s.io"):
            continue  # Kubernetes' own kinds: kubernetes-validate checks them
        name = f"{doc['kind']} {doc['metadata']['name']}"
        path = SCHEMAS / group / f"{doc['kind'].lower()}_{version}.json"
        if not path.exists():
            errors.append(f"{name}: no schema {path.relative_to(ROOT)}")
            continue
        validator = jsonschema.Draft7Validator(json.loads(path.read_text()))
        errors += [
            f"{name} at {list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)
        ]
    return errors


@pytest.mark.parametrize("overlay", RENDERS)
def test_operator_kinds_match_their_crd_schemas(overlay: str) -> None:
    docs = [doc for doc in yaml.safe_load_all(render_text(overlay)) if doc]
    assert crd_schema_errors(docs) == []


def test_crd_schemas_refuse_unknown_fields() -> None:
    """The schemas are strict: a misspelt field of a Cluster is an error."""
    cluster = rendered("production")[("Cluster", "railyard-pg")]
    wrong = {**cluster, "spec": {**cluster["spec"], "instance": 3}}
    (error,) = crd_schema_errors([wrong])
    assert "'instance' was unexpected" in error


def test_overlays_pass_checkov(tmp_path: Path) -> None:
    assert CHECKOV.exists(), f"{CHECKOV} is missing: `make test` installs it"
    files = [arg for overlay in RENDERS for arg in ("--file", str(_write(tmp_path, overlay)))]
    flags = ["--framework", "kubernetes", "--compact", "--quiet", "--skip-download"]
    result = run(
        [str(CHECKOV), *files, *flags],
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Failed checks: 0" in result.stdout, result.stdout[-4000:]
    # Every skip is one the manifests declare with a reason (checkov.io/skip annotations).
    assert "Skipped checks: 0" not in result.stdout


@pytest.mark.parametrize("overlay", RENDERS)
def test_every_railyard_pod_is_hardened_probed_and_bounded(overlay: str) -> None:
    resources = resources_of(overlay)
    workloads = [doc for (kind, _), doc in resources.items() if kind in ("Deployment", "Job")]
    names = {re.sub(r"-\d+$", "", doc["metadata"]["name"]) for doc in workloads}
    assert names == {
        "railyard-api",
        "railyard-worker",
        "railyard-scheduler",
        "railyard-events",
        "railyard-migrate",
    }
    for doc in workloads:
        pod = doc["spec"]["template"]["spec"]
        name = doc["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["automountServiceAccountToken"] is False, name
        (container,) = pod["containers"]
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, name
        assert security["allowPrivilegeEscalation"] is False, name
        assert security["capabilities"]["drop"] == ["ALL"], name
        for bound in ("requests", "limits"):
            assert set(container["resources"][bound]) == {"cpu", "memory"}, name
        refs = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
        assert refs == {"railyard-config", "railyard-secrets"}, name
        if doc["kind"] == "Deployment":
            assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready", name
            assert container["livenessProbe"]["httpGet"]["path"] == "/health/live", name
            # liveness starts only once the process is up (a slow start is not a crash)
            assert container["startupProbe"]["httpGet"]["path"] == "/health/live", name
            assert "initialDelaySeconds" not in container["livenessProbe"], name


@pytest.mark.parametrize("overlay", RENDERS)
def test_scheduler_pairs_and_api_disruption_budget(overlay: str) -> None:
    resources = resources_of(overlay)
    assert resources[("Deployment", "railyard-scheduler")]["spec"]["replicas"] == 2
    api = resources[("Deployment", "railyard-api")]
    budget = resources[("PodDisruptionBudget", "railyard-api")]
    assert budget["spec"]["selector"]["matchLabels"] == api["spec"]["selector"]["matchLabels"]
    if overlay == "production":
        assert budget["spec"]["minAvailable"] >= 1
        assert api["spec"]["replicas"] > budget["spec"]["minAvailable"]
    job = migrate_job(resources)
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]


def test_production_scales_workers_with_keda_on_the_queue_depth_and_cpu() -> None:
    resources = rendered("production")
    # KEDA makes its own HorizontalPodAutoscaler; a second one would fight it.
    assert not [key for key in resources if key[0] == "HorizontalPodAutoscaler"]
    scaled = resources[("ScaledObject", "railyard-worker")]["spec"]
    assert scaled["scaleTargetRef"]["name"] == "railyard-worker"
    assert ("Deployment", "railyard-worker") in resources
    triggers = {trigger["type"]: trigger for trigger in scaled["triggers"]}
    # arq's queue is a sorted set (ZADD); KEDA's redis trigger reads a list's length (LLEN)
    # and would fail on it, so scaling follows the queue depth the API exports instead
    assert "redis" not in triggers and "redis-sentinel" not in triggers
    query = triggers["prometheus"]["metadata"]["query"]
    assert query.startswith(f"max({QUEUE_DEPTH._name}")  # every API pod reports the same value
    assert triggers["prometheus"]["metadata"]["ignoreNullValues"] == "false"  # -> fallback
    worker = resources[("Deployment", "railyard-worker")]["spec"]["template"]["spec"]
    max_jobs = _flag(worker["containers"][0]["args"], "--max-jobs", DEFAULT_MAX_JOBS)
    assert int(triggers["prometheus"]["metadata"]["threshold"]) == max_jobs
    assert triggers["cpu"]["metadata"]["value"]
    assert scaled["minReplicaCount"] >= 1 and "fallback" in scaled


def _flag(args: list[str], name: str, default: int) -> int:
    return int(args[args.index(name) + 1]) if name in args else default


def test_dev_scales_workers_on_cpu_and_brings_its_own_secret() -> None:
    resources = rendered("dev")
    hpa = resources[("HorizontalPodAutoscaler", "railyard-worker")]["spec"]
    assert hpa["scaleTargetRef"]["name"] == "railyard-worker"
    assert hpa["metrics"][0]["resource"]["name"] == "cpu"
    secret = resources[("Secret", "railyard-secrets")]
    assert {"DATABASE_URL", "REDIS_URL", "RAILYARD_SECRET_KEY", "RAILYARD_ENCRYPTION_KEY"} <= set(
        secret["data"]
    )


@pytest.mark.parametrize("overlay", RENDERS)
def test_network_is_denied_by_default_and_opened_per_need(overlay: str) -> None:
    resources = resources_of(overlay)
    policies = {
        name: doc["spec"] for (kind, name), doc in resources.items() if kind == "NetworkPolicy"
    }
    deny = policies["railyard-default-deny"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny and "egress" not in deny
    ingress = policies["railyard-api-ingress"]["ingress"]
    assert [port["port"] for rule in ingress for port in rule["ports"]] == [8000]
    egress = policies["railyard-egress-datastores"]["egress"]
    ports = {port["port"] for rule in egress for port in rule["ports"]}
    assert {53, 5432, 6379, 26379} <= ports
    # Prometheus (namespace monitoring) scrapes the probe port of the other processes
    metrics = policies["railyard-metrics-ingress"]
    selected = {e["key"]: e["values"] for e in metrics["podSelector"]["matchExpressions"]}
    assert set(selected["app.kubernetes.io/component"]) == {"worker", "scheduler", "events"}
    (rule,) = metrics["ingress"]
    assert [p["port"] for p in rule["ports"]] == [8001]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]


def test_production_believes_forwarded_headers_only_from_the_ingress() -> None:
    """The API believes X-Forwarded-For only from RAILYARD_TRUSTED_PROXIES (issue 29,
    finding 6): production sets it, and only the ingress controller and Prometheus may
    connect to the API at all; the dev overlay trusts no proxy."""
    resources = rendered("production")
    config = next(doc for (kind, _), doc in resources.items() if kind == "ConfigMap")
    assert config["data"]["RAILYARD_TRUSTED_PROXIES"]
    policy = resources[("NetworkPolicy", "railyard-api-ingress")]["spec"]
    sources = [
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for rule in policy["ingress"]
        for peer in rule["from"]
    ]
    assert sources == ["ingress-nginx", "monitoring"]
    dev = next(doc for (kind, _), doc in rendered("dev").items() if kind == "ConfigMap")
    assert "RAILYARD_TRUSTED_PROXIES" not in dev["data"]


@pytest.mark.parametrize("overlay", RENDERS)
def test_probe_ports_listen_on_the_pod_ip(overlay: str) -> None:
    """Worker, scheduler and events processes serve /health and /metrics on a probe port
    that listens on loopback unless told otherwise (issue 29, finding 8); the manifests
    give it the pod's own address through the downward API, never 0.0.0.0."""
    resources = resources_of(overlay)
    for name in ("railyard-worker", "railyard-scheduler", "railyard-events"):
        (container,) = resources[("Deployment", name)]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for e in container.get("env", [])}
        source = env["RAILYARD_HEALTH_HOST"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert source == "status.podIP", name


def test_the_documented_upgrade_order_selects_one_part_at_a_time() -> None:
    """docs/operations.md, "Zero-downtime upgrades" applies the overlay part by part with
    ``-l app.kubernetes.io/component=<part>``: each selector must pick that part's
    workload (and the migration nothing else)."""
    resources = rendered("production")

    def part(component: str) -> set[tuple[str, str]]:
        return {
            key
            for key, doc in resources.items()
            if doc["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
        }

    assert part("migrate") == {("Job", "railyard-migrate")}
    for component in ("api", "worker", "scheduler", "events"):
        assert ("Deployment", f"railyard-{component}") in part(component)
    text = (ROOT / "docs" / "operations.md").read_text()
    for command in (
        "kubectl apply -k $O -l app.kubernetes.io/component=migrate",
        "for part in api worker scheduler events; do",
        "kubectl apply -k $O -l app.kubernetes.io/component=$part",
    ):
        assert command in text


@pytest.mark.parametrize("source", PRODUCTION)
def test_production_places_pods_for_failures_and_pins_the_image(source: str) -> None:
    """Schedulers never share a node; workers spread over nodes and zones and leave a node
    a quarter at a time; every Railyard image is pinned by digest."""
    resources = resources_of(source)
    scheduler = resources[("Deployment", "railyard-scheduler")]["spec"]["template"]["spec"]
    (required,) = scheduler["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert required["topologyKey"] == "kubernetes.io/hostname"
    assert required["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "scheduler"
    worker = resources[("Deployment", "railyard-worker")]["spec"]["template"]["spec"]
    keys = {c["topologyKey"] for c in worker["topologySpreadConstraints"]}
    assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    budget = resources[("PodDisruptionBudget", "railyard-worker")]["spec"]
    assert budget["maxUnavailable"] == "25%"
    assert budget["selector"] == resources[("Deployment", "railyard-worker")]["spec"]["selector"]
    for (kind, name), doc in resources.items():
        if kind in ("Deployment", "Job") and name.startswith("railyard-"):
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            assert re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", container["image"]), name
            assert container["imagePullPolicy"] == "IfNotPresent", name


@pytest.mark.parametrize("source", PRODUCTION)
def test_production_pod_monitors_scrape_every_process_with_the_token(source: str) -> None:
    resources = resources_of(source)
    scraped: dict[str, str] = {}
    for (kind, _), doc in resources.items():
        if kind != "PodMonitor":
            continue
        selector = doc["spec"]["selector"]
        components = (
            [selector["matchLabels"]["app.kubernetes.io/component"]]
            if "matchLabels" in selector
            else next(
                e["values"]
                for e in selector["matchExpressions"]
                if e["key"] == "app.kubernetes.io/component"
            )
        )
        (endpoint,) = doc["spec"]["podMetricsEndpoints"]
        assert endpoint["path"] == "/metrics"
        credentials = endpoint["authorization"]["credentials"]
        assert credentials == {"name": "railyard-secrets", "key": "RAILYARD_METRICS_TOKEN"}
        scraped.update(dict.fromkeys(components, endpoint["port"]))
    assert scraped == {"api": "http", "worker": "health", "scheduler": "health", "events": "health"}
    for component, port in scraped.items():
        (container,) = resources[("Deployment", f"railyard-{component}")]["spec"]["template"][
            "spec"
        ]["containers"]
        assert port in {p["name"] for p in container["ports"]}, component


@pytest.mark.parametrize("source", PRODUCTION)
def test_production_postgresql_and_redis_come_from_operators(source: str) -> None:
    """CloudNativePG: three instances, a synchronous standby that must acknowledge
    (RPO 0), WAL archived and nightly base backups to object storage; Redis replicated and
    watched by three Sentinels, which Railyard asks for the primary."""
    resources = resources_of(source)
    cluster = resources[("Cluster", "railyard-pg")]["spec"]
    assert cluster["instances"] == 3
    assert cluster["postgresql"]["synchronous"] == {
        "method": "any",
        "number": 1,
        "dataDurability": "required",
    }
    (plugin,) = cluster["plugins"]
    assert plugin["isWALArchiver"] is True
    store = resources[("ObjectStore", plugin["parameters"]["barmanObjectName"])]["spec"]
    assert store["configuration"]["destinationPath"].startswith("s3://")
    backup = resources[("ScheduledBackup", "railyard-pg-nightly")]["spec"]
    assert backup["cluster"]["name"] == "railyard-pg" and backup["method"] == "plugin"
    redis = resources[("RedisReplication", "railyard-redis")]["spec"]
    assert redis["clusterSize"] == 3 and redis["sentinel"]["size"] == 3
    config = next(doc for (kind, _), doc in resources.items() if kind == "ConfigMap")["data"]
    sentinels = config["RAILYARD_REDIS_SENTINELS"].split(",")
    assert sentinels == [f"railyard-redis-s-{n}.railyard-redis-s-hl:26379" for n in range(3)]
    assert config["RAILYARD_REDIS_SENTINEL_MASTER"] == "mymaster"
