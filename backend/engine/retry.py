"""Retry delays: exponential backoff with jitter, capped (Temporal's retry policy).

Source of the formula: Temporal's RetryPolicy (initial interval, backoff coefficient,
maximum interval) and AWS's "Exponential Backoff and Jitter" (2015) for the jitter.
"""

from __future__ import annotations

import random

from designer_schema.graph import RetryPolicy


def retry_delay(
    policy: RetryPolicy,
    attempt: int,
    *,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before the attempt after ``attempt`` (1-based).

    ``min(initial * coefficient ** (attempt - 1), max_interval)`` scaled by a uniform factor
    in ``[1 - jitter, 1 + jitter]``. When a server's ``retry_after`` (Retry-After, in
    seconds) is longer, the delay is ``retry_after`` scaled by a uniform factor in
    ``[1, 1 + jitter]``: never earlier than the server asked, and spread, so the runs one
    throttling answer stopped do not all come back in the same instant (AWS's jitter
    applied after the server's floor).
    """
    chance = rng or random
    base = policy.initial_interval * policy.backoff_coefficient ** max(attempt - 1, 0)
    base = min(base, policy.max_interval)
    if policy.jitter > 0:
        base *= chance.uniform(1 - policy.jitter, 1 + policy.jitter)
    if retry_after is not None and retry_after > base:
        base = retry_after
        if policy.jitter > 0:
            base *= chance.uniform(1, 1 + policy.jitter)
    return max(base, 0.0)


def should_retry(policy: RetryPolicy, attempt: int, *, retryable: bool, kind: str) -> bool:
    """True when another attempt is allowed after ``attempt`` failed with error ``kind``."""
    if not retryable or kind in policy.non_retryable_error_kinds:
        return False
    return attempt < policy.max_attempts
