"""Retry delays (backend/engine/retry.py): backoff with jitter, and jitter kept when a
server's Retry-After is the longer wait."""

from __future__ import annotations

import random

from backend.engine.retry import retry_delay
from designer_schema.graph import RetryPolicy

POLICY = RetryPolicy(max_attempts=5, initial_interval=1.0, backoff_coefficient=2.0, jitter=0.2)


def test_backoff_grows_within_its_jitter() -> None:
    rng = random.Random(7)
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0)):
        delay = retry_delay(POLICY, attempt, rng=rng)
        assert base * 0.8 <= delay <= base * 1.2


def test_retry_after_is_a_floor_and_runs_throttled_together_are_spread() -> None:
    rng = random.Random(11)
    delays = [retry_delay(POLICY, 1, retry_after=10.0, rng=rng) for _ in range(8)]
    assert all(10.0 <= d <= 12.0 for d in delays)
    # eight runs one 429 stopped come back over seconds, not within a tenth of one
    assert max(delays) - min(delays) > 0.5


def test_without_jitter_retry_after_is_exact_and_a_short_one_leaves_the_backoff() -> None:
    exact = RetryPolicy(max_attempts=3, initial_interval=1.0, jitter=0.0)
    assert retry_delay(exact, 1, retry_after=10.0) == 10.0
    assert retry_delay(exact, 3, retry_after=0.5) == 4.0
