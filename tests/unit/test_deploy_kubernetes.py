"""The Kubernetes manifests, rendered and validated offline.

Each overlay under deploy/kubernetes/overlays is rendered by kustomize (``kubectl kustomize``,
or a standalone ``kustomize``), then checked three ways: yamllint on the sources,
kubernetes-validate (the resources against Kubernetes' OpenAPI schemas, strict), and checkov
(misconfigurations: non-root, probes, limits, capabilities, ...; from the checkov
virtualenv the Makefile makes), plus the structural rules of docs/operations.md,
"Kubernetes" that no generic tool knows.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from backend.observability.metrics import QUEUE_DEPTH
from backend.workers.worker import DEFAULT_MAX_JOBS

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("dev", "production")
BIN = Path(sys.executable).parent
CHECKOV = Path(os.environ.get("RAILYARD_CHECKOV", ROOT / ".venv" / "checkov" / "bin" / "checkov"))


def _run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)


def _kustomize_command() -> list[str]:
    if kubectl := shutil.which("kubectl"):
        return [kubectl, "kustomize"]
    if kustomize := shutil.which("kustomize"):
        return [kustomize, "build"]
    pytest.fail("neither kubectl nor kustomize is on PATH: the manifests cannot be rendered")


@functools.cache
def _rendered_text(overlay: str) -> str:
    result = _run([*_kustomize_command(), str(KUBERNETES / "overlays" / overlay)])
    assert result.returncode == 0, result.stderr
    return result.stdout


def _rendered(overlay: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The overlay's resources by (kind, name)."""
    docs = [doc for doc in yaml.safe_load_all(_rendered_text(overlay)) if doc]
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}


def _write(tmp_path: Path, overlay: str) -> Path:
    path = tmp_path / f"{overlay}.yaml"
    path.write_text(_rendered_text(overlay))
    return path


def test_sources_pass_yamllint() -> None:
    config = ROOT / "deploy" / ".yamllint"
    result = _run([str(BIN / "yamllint"), "-s", "-c", str(config), str(ROOT / "deploy")])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_matches_the_kubernetes_schemas(overlay: str, tmp_path: Path) -> None:
    path = _write(tmp_path, overlay)
    result = _run([str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
    # KEDA's kinds have no schema there: the only warnings allowed are about them.
    for line in (result.stdout + result.stderr).splitlines():
        assert "keda.sh/" in line, line


def test_overlays_pass_checkov(tmp_path: Path) -> None:
    assert CHECKOV.exists(), f"{CHECKOV} is missing: `make test` installs it"
    files = [arg for overlay in OVERLAYS for arg in ("--file", str(_write(tmp_path, overlay)))]
    flags = ["--framework", "kubernetes", "--compact", "--quiet", "--skip-download"]
    result = _run(
        [str(CHECKOV), *files, *flags],
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Failed checks: 0" in result.stdout, result.stdout[-4000:]
    # Every skip is one the manifests declare with a reason (checkov.io/skip annotations).
    assert "Skipped checks: 0" not in result.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_railyard_pod_is_hardened_probed_and_bounded(overlay: str) -> None:
    resources = _rendered(overlay)
    workloads = [doc for (kind, _), doc in resources.items() if kind in ("Deployment", "Job")]
    assert {doc["metadata"]["name"] for doc in workloads} == {
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


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_scheduler_pairs_and_api_disruption_budget(overlay: str) -> None:
    resources = _rendered(overlay)
    assert resources[("Deployment", "railyard-scheduler")]["spec"]["replicas"] == 2
    api = resources[("Deployment", "railyard-api")]
    budget = resources[("PodDisruptionBudget", "railyard-api")]
    assert budget["spec"]["selector"]["matchLabels"] == api["spec"]["selector"]["matchLabels"]
    if overlay == "production":
        assert budget["spec"]["minAvailable"] >= 1
        assert api["spec"]["replicas"] > budget["spec"]["minAvailable"]
    job = resources[("Job", "railyard-migrate")]
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]


def test_production_scales_workers_with_keda_on_the_queue_depth_and_cpu() -> None:
    resources = _rendered("production")
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
    resources = _rendered("dev")
    hpa = resources[("HorizontalPodAutoscaler", "railyard-worker")]["spec"]
    assert hpa["scaleTargetRef"]["name"] == "railyard-worker"
    assert hpa["metrics"][0]["resource"]["name"] == "cpu"
    secret = resources[("Secret", "railyard-secrets")]
    assert {"DATABASE_URL", "REDIS_URL", "RAILYARD_SECRET_KEY", "RAILYARD_ENCRYPTION_KEY"} <= set(
        secret["data"]
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_is_denied_by_default_and_opened_per_need(overlay: str) -> None:
    resources = _rendered(overlay)
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


def test_production_believes_forwarded_headers_only_from_the_ingress() -> None:
    """The API believes X-Forwarded-For only from RAILYARD_TRUSTED_PROXIES (issue 29,
    finding 6): production sets it, and only the ingress controller and Prometheus may
    connect to the API at all; the dev overlay trusts no proxy."""
    resources = _rendered("production")
    config = next(doc for (kind, _), doc in resources.items() if kind == "ConfigMap")
    assert config["data"]["RAILYARD_TRUSTED_PROXIES"]
    policy = resources[("NetworkPolicy", "railyard-api-ingress")]["spec"]
    sources = [
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for rule in policy["ingress"]
        for peer in rule["from"]
    ]
    assert sources == ["ingress-nginx", "monitoring"]
    dev = next(doc for (kind, _), doc in _rendered("dev").items() if kind == "ConfigMap")
    assert "RAILYARD_TRUSTED_PROXIES" not in dev["data"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probe_ports_listen_on_the_pod_ip(overlay: str) -> None:
    """Worker, scheduler and events processes serve /health and /metrics on a probe port
    that listens on loopback unless told otherwise (issue 29, finding 8); the manifests
    give it the pod's own address through the downward API, never 0.0.0.0."""
    resources = _rendered(overlay)
    for name in ("railyard-worker", "railyard-scheduler", "railyard-events"):
        (container,) = resources[("Deployment", name)]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for e in container.get("env", [])}
        source = env["RAILYARD_HEALTH_HOST"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert source == "status.podIP", name


def test_the_documented_upgrade_order_selects_one_part_at_a_time() -> None:
    """docs/operations.md, "Zero-downtime upgrades" applies the overlay part by part with
    ``-l app.kubernetes.io/component=<part>``: each selector must pick that part's
    workload (and the migration nothing else)."""
    resources = _rendered("production")

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
