"""The answer to a request that started a run: its id, status and where to follow it.

Shared by the controllers that start runs (workflows, runs, webhooks), which do not
import each other.
"""

from __future__ import annotations

import uuid

from backend.api.schemas import DeliveryAccepted, RunStarted
from backend.runtime import Runtime


def run_started(runtime: Runtime, run_id: uuid.UUID, status: str) -> RunStarted:
    """Links of an accepted run: its page (``/runs/<id>``) and its API status URL."""
    base = runtime.settings.base_url.rstrip("/")
    return RunStarted(
        id=str(run_id),
        status=status,
        url=f"{base}/runs/{run_id}",
        status_url=f"{base}/api/v1/runs/{run_id}",
    )


def delivery_accepted(runtime: Runtime, run_id: uuid.UUID, status: str) -> DeliveryAccepted:
    """A webhook's answer naming the run it started (``run_id``) with the run's links."""
    links = run_started(runtime, run_id, status)
    return DeliveryAccepted(links.id, links.status, links.url, links.status_url)
