"""Per-endpoint webhook rate limit: a fixed one-minute window counted in Redis.

``INCR railyard:rl:<workflow id>:<minute>`` (expiring after the window); a request past the
limit gets 429 with ``Retry-After`` = whole seconds until the window ends. Every API process
shares the count through Redis.
"""

from __future__ import annotations

import math
from typing import Any

WINDOW_SECONDS = 60


async def check(redis: Any, key: str, limit: int, now: float) -> float | None:
    """Count one request; returns ``None`` when allowed, else the Retry-After in seconds."""
    window = int(now // WINDOW_SECONDS)
    name = f"railyard:rl:{key}:{window}"
    pipe = redis.pipeline(transaction=False)
    pipe.incr(name)
    pipe.expire(name, WINDOW_SECONDS + 1)
    count, _ = await pipe.execute()
    if int(count) <= limit:
        return None
    return float(max(1, math.ceil((window + 1) * WINDOW_SECONDS - now)))
