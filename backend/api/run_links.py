"""The answer to a request that started a run: its id, status and where to follow it.

Shared by the controllers that start runs (workflows, runs), which do not import each
other. A webhook delivery's answer is the delivery use case's
(:class:`backend.services.triggers.webhook_answers.RunLinks`, the shape of
:class:`backend.api.schemas.DeliveryAccepted`).
"""

from __future__ import annotations

import uuid

from backend.api.schemas import RunStarted
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
