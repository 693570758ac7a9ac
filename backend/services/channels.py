"""Names of the Redis pub/sub channels that announce run changes (best effort, not truth)."""

from __future__ import annotations


def run_channel(run_id: str) -> str:
    """Channel on which a change of run ``run_id`` is announced."""
    return f"railyard:run:{run_id}"


CANCEL_CHANNEL = "railyard:cancel"
"""Channel carrying the id of each run that was cancelled or timed out, so the workers
running its attempts stop them at once (backend/services/cancellation.py)."""

WAKE_CHANNEL = "railyard:queue:wake"
"""Channel on which the dispatcher announces an enqueued job, waking idle workers
(backend/workers/wake.py)."""
