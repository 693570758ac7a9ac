"""The deploy files restart crashed processes and probe each one's readiness."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose.yaml"
LONG_RUNNING = {"postgres", "redis", "api", "worker", "scheduler"}


def test_compose_restarts_every_long_running_process_and_probes_it() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert LONG_RUNNING <= set(services)
    for name in LONG_RUNNING:
        service = services[name]
        assert service.get("restart") in ("unless-stopped", "always"), name
        assert service.get("healthcheck", {}).get("test"), name
    assert services["migrate"]["restart"] == "on-failure"  # a one-shot job, retried
    for name in ("worker", "scheduler"):
        env = services[name]["environment"]
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert f":{env['RAILYARD_HEALTH_PORT']}/health/ready" in probe, name
