"""Reading what deploy/ describes, for the deployment tests: the compose file's services,
compose durations, and the Kubernetes overlays rendered by kustomize."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
KUBERNETES = DEPLOY / "kubernetes"
OVERLAYS = ("dev", "production")


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (two minutes at most), capturing its text output."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)


def compose_services() -> dict[str, Any]:
    """The compose file's services by name."""
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    return services


def seconds(duration: str) -> float:
    """A compose duration (``35s``, ``1m30s``) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(float(n) * units[u] for n, u in parts)


def _kustomize_command() -> list[str]:
    if kubectl := shutil.which("kubectl"):
        return [kubectl, "kustomize"]
    if kustomize := shutil.which("kustomize"):
        return [kustomize, "build"]
    pytest.fail("neither kubectl nor kustomize is on PATH: the manifests cannot be rendered")


@functools.cache
def rendered_text(overlay: str) -> str:
    """The overlay rendered by kustomize (YAML, many documents)."""
    result = run([*_kustomize_command(), str(KUBERNETES / "overlays" / overlay)])
    assert result.returncode == 0, result.stderr
    return result.stdout


def by_kind_and_name(text: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The resources of rendered YAML by (kind, name)."""
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}


def rendered(overlay: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The overlay's resources by (kind, name)."""
    return by_kind_and_name(rendered_text(overlay))


CHART = DEPLOY / "helm" / "railyard"

HELM_VALUES: dict[str, dict[str, Any]] = {
    # an external PostgreSQL and Redis, workers on CPU: the chart's defaults
    "helm-external": {},
    # what the production overlay runs: CloudNativePG, the redis-operator, KEDA, a digest
    "helm-operators": {
        "image": {"digest": "sha256:" + "0" * 64},
        "config": {"trustedProxies": "10.0.0.0/8"},
        "postgresql": {"mode": "cloudnativepg"},
        "redis": {"mode": "bundled"},
        "worker": {"autoscaling": {"type": "keda", "minReplicas": 2, "maxReplicas": 50}},
        "ingress": {"enabled": True, "tlsSecret": "railyard-tls"},
    },
}
"""Value sets the Helm chart is rendered with by the tests (release ``railyard``)."""

RENDERS = (*OVERLAYS, *HELM_VALUES)
"""Everything the manifest tests check: the kustomize overlays and the chart's renders."""


@functools.cache
def helm_rendered_text(variant: str) -> str:
    """The chart rendered by Helm's own engine (the Helm SDK in the ``helm-python-sdk``
    wheel: no ``helm`` binary is packaged where this project installs from) as release
    ``railyard`` in namespace ``railyard`` with :data:`HELM_VALUES` ``[variant]``."""
    import helm_python

    chart = helm_python.Chart.load(CHART)
    out = chart.render(HELM_VALUES[variant], name="railyard", namespace="railyard")
    return "".join(f"---\n# Source: {path}\n{text}\n" for path, text in sorted(out.items()))


def render_text(source: str) -> str:
    """A kustomize overlay or a Helm value set (:data:`RENDERS`) rendered."""
    return helm_rendered_text(source) if source in HELM_VALUES else rendered_text(source)


def resources_of(source: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The resources of :func:`render_text` by (kind, name)."""
    return by_kind_and_name(render_text(source))


def migrate_job(resources: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """The migration Job (``railyard-migrate``, or ``railyard-migrate-<revision>`` of Helm)."""
    (job,) = [
        doc
        for (kind, name), doc in resources.items()
        if kind == "Job" and re.fullmatch(r"railyard-migrate(-\d+)?", name)
    ]
    return job
