"""Names of the Redis pub/sub channels that announce run changes (best effort, not truth)."""

from __future__ import annotations


def run_channel(run_id: str) -> str:
    """Channel on which a change of run ``run_id`` is announced."""
    return f"railyard:run:{run_id}"
