"""The Helm chart deploy/helm/railyard: ``helm lint`` (strict) and ``helm template`` by
Helm's own engine (the Helm SDK in the ``helm-python-sdk`` wheel). Its renders go through
every check the kustomize overlays go through (tests/unit/test_deploy_kubernetes.py and
test_deploy_budget.py parametrize over ``RENDERS``); this module checks what only the
chart has: its lint, its choices and its upgrade hook."""

from __future__ import annotations

import re
from typing import Any

import helm_python
import pytest

from tests.unit.deploy_files import CHART, HELM_VALUES, by_kind_and_name


def _render(values: dict[str, Any], **options: Any) -> dict[tuple[str, str], dict[str, Any]]:
    out = helm_python.Chart.load(CHART).render(
        values, name="railyard", namespace="railyard", **options
    )
    return by_kind_and_name("\n---\n".join(out.values()))


def _env(resources: dict[tuple[str, str], dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (container,) = resources[(kind, name)]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e for e in container["env"]}


@pytest.mark.parametrize("variant", HELM_VALUES)
def test_chart_passes_helm_lint_strictly(variant: str) -> None:
    report = helm_python.lint(CHART, HELM_VALUES[variant], strict=True, namespace="railyard")
    assert report["errors"] == []
    # info ("icon is recommended") is all that may remain: no warning, no error
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_chart_refuses_values_it_does_not_know() -> None:
    """values.schema.json: an unknown mode, a misspelt key, a tag where the digest goes."""
    for values, where in [
        ({"postgresql": {"mode": "sqlite"}}, "/postgresql/mode"),
        ({"worker": {"autoscaling": {"type": "vpa"}}}, "/worker/autoscaling/type"),
        ({"replicas": 3}, "additional properties 'replicas'"),
        ({"image": {"digest": "0.1.0"}}, "/image/digest"),
    ]:
        with pytest.raises(helm_python.HelmValuesError, match=re.escape(where)):
            _render(values)


def test_switches_leave_out_what_they_turn_off() -> None:
    resources = _render({"networkPolicy": {"enabled": False}, "metrics": {"podMonitor": False}})
    assert not [key for key in resources if key[0] in ("NetworkPolicy", "PodMonitor")]
    assert ("Ingress", "railyard-api") not in resources


def test_external_postgresql_gives_schedulers_their_session_url() -> None:
    """With DATABASE_URL through a transaction pooler, the schedulers and the migration
    take ``schedulerKey`` (their leader lock needs a session); the rest the pooled URL."""
    resources = _render(
        {"postgresql": {"external": {"existingSecret": "db", "schedulerKey": "DIRECT_URL"}}}
    )
    ref = _env(resources, "Deployment", "railyard-worker")["DATABASE_URL"]["valueFrom"]
    assert ref["secretKeyRef"] == {"name": "db", "key": "DATABASE_URL"}
    for kind, name in [("Deployment", "railyard-scheduler"), ("Job", "railyard-migrate-1")]:
        ref = _env(resources, kind, name)["DATABASE_URL"]["valueFrom"]
        assert ref["secretKeyRef"] == {"name": "db", "key": "DIRECT_URL"}, name
    assert ("Cluster", "railyard-pg") not in resources
    assert ("RedisReplication", "railyard-redis") not in resources


def test_an_upgrade_migrates_before_anything_rolls() -> None:
    """``helm upgrade``: the revision's migration Job is a pre-upgrade hook (the processes
    roll only once it succeeded); the first install creates it with everything else."""
    job = _render({}, revision=7, is_upgrade=True)[("Job", "railyard-migrate-7")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade"
    first = _render({}, revision=1, is_install=True)[("Job", "railyard-migrate-1")]
    assert "helm.sh/hook" not in first["metadata"]["annotations"]


def test_ingress_routes_to_the_api_and_autoscaling_follows_its_choice() -> None:
    resources = _render(HELM_VALUES["helm-operators"])
    rule = resources[("Ingress", "railyard-api")]["spec"]["rules"][0]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "railyard-api", "port": {"name": "http"}}
    assert ("ScaledObject", "railyard-worker") in resources
    assert ("HorizontalPodAutoscaler", "railyard-worker") not in resources
    # KEDA owns the worker's replica count
    assert "replicas" not in resources[("Deployment", "railyard-worker")]["spec"]
    fixed = _render({"worker": {"replicas": 5, "autoscaling": {"type": "none"}}})
    assert fixed[("Deployment", "railyard-worker")]["spec"]["replicas"] == 5
    assert not [key for key in fixed if key[0] in ("ScaledObject", "HorizontalPodAutoscaler")]
