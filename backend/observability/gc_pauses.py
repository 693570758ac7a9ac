"""Python's cyclic garbage collector in a serving process: tuned once at startup, its
pauses measured.

Why: a full (generation 2) collection traverses every object the collector tracks. In the
API that is about 180,000 objects once the app is built (Litestar's routes, SQLAlchemy's
mappers, the node catalog, the modules themselves), almost all of them alive for the
process's lifetime: one full collection took about 200 ms on the shared 2-core machine,
and every request in flight waited for it (the p99 tail of a loaded webhook).

The remedy (CPython's ``gc.freeze`` documentation; Instagram Engineering, "Dismissing
Python Garbage Collection at Instagram", 2017): once startup is done, move every object
alive into the permanent generation (:func:`gc.freeze`), which no collection traverses
again, and collect the youngest generation less often (:data:`GC_THRESHOLDS`), so the
many short-lived containers of each request are mostly freed by reference counting
before a collection looks at them. Cycles still get collected: only the objects alive at
startup are exempt.

:func:`configure` does both once per process and records every collection's pause in
``railyard_gc_pause_seconds{generation}`` (histogram, seconds) of
:mod:`backend.observability.metrics`' registry.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Histogram

GC_THRESHOLDS = (20_000, 10, 10)
"""``gc.set_threshold`` of a serving process: a generation 0 collection after 20,000 more
allocations than deallocations of tracked objects (CPython's default: 700); the older
generations keep CPython's defaults (each collected after 10 collections of the younger)."""

PAUSE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)

GC_PAUSES = Histogram(
    "railyard_gc_pause_seconds",
    "Pauses of Python's cyclic garbage collector, by generation collected.",
    ["generation"],
    buckets=PAUSE_BUCKETS,
)

_configured = False
_started: float | None = None
_children = [GC_PAUSES.labels(str(generation)) for generation in range(3)]


def configure() -> bool:
    """Tune the collector of this process (module doc): freeze the objects alive now, set
    :data:`GC_THRESHOLDS`, and time every collection from now on. Call it once startup
    is done (the app and its runtime built). Returns True when it did so, False when an
    earlier call already had (nothing changes then)."""
    global _configured
    if _configured:
        return False
    _configured = True
    gc.collect()  # what startup left as garbage is freed, not frozen
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    gc.callbacks.append(_timed)
    return True


def configured() -> bool:
    """Whether :func:`configure` ran in this process."""
    return _configured


def _timed(phase: str, info: dict[str, Any]) -> None:
    """``gc.callbacks`` hook: observe each collection's duration by its generation."""
    global _started
    if phase == "start":
        _started = time.perf_counter()
    elif _started is not None:
        _children[info["generation"]].observe(time.perf_counter() - _started)
        _started = None
