"""The end of the answer waits of a stopping API process.

A webhook whose response mode waits for its run (``respond_node``, ``last_step``) holds
its request open while the run goes on. When the process stops, uvicorn lets in-flight
requests finish within ``RAILYARD_SHUTDOWN_GRACE`` seconds and then cancels them, which
would cut such a webhook off without an answer. So the shutdown sets a cutoff a little
before that: every answer wait still going on then ends as if its wait timeout had
passed, and the webhook answers 202 with the run's links (docs/webhooks.md), which the
client can follow; the run itself goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, MutableMapping
from typing import Any, TypeVar

T = TypeVar("T")

CUTOFF = "answer_cutoff"
"""The app-state key of the process's :class:`Cutoff`."""

MARGIN = 1.0
"""Seconds before the end of the grace the waits end (at most a fifth of the grace), so
their 202 answers are written before uvicorn cancels what is left."""


class Cutoff:
    """The moment answer waits end. Not bound to an event loop (an app may serve from
    several loops in tests): each wait makes its future in its own loop."""

    def __init__(self) -> None:
        self.passed = False
        self._waiters: set[asyncio.Future[None]] = set()

    def fire(self) -> None:
        """The cutoff has come: every wait ends now, later ones at once."""
        self.passed = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self) -> None:
        """Return when :meth:`fire` is called (at once when it was)."""
        if self.passed:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            await waiter
        finally:
            self._waiters.discard(waiter)


def app_cutoff(state: MutableMapping[str, Any]) -> Cutoff:
    """The :class:`Cutoff` of the app whose state is ``state`` (made on first use)."""
    found = state.get(CUTOFF)
    if found is None:
        found = state[CUTOFF] = Cutoff()
    return found  # type: ignore[no-any-return]


def cut_waits_after(state: MutableMapping[str, Any], grace: float) -> float:
    """Called when the API stops taking requests: answer waits end ``grace`` seconds from
    now less a margin (:data:`MARGIN`, at most ``grace / 5``). Returns the event loop time
    (``loop.time()``, seconds) at which the grace itself ends."""
    loop = asyncio.get_running_loop()
    margin = min(MARGIN, grace / 5)
    loop.call_later(max(0.0, grace - margin), app_cutoff(state).fire)
    return loop.time() + grace


async def unless_cut(cutoff: Cutoff | MutableMapping[str, Any], wait: Awaitable[T]) -> T | None:
    """``await wait``, or None when the ``cutoff`` (or that of the app whose state it
    is) comes first (then ``wait`` is cancelled); None at once when the cutoff has
    passed. Exceptions of ``wait`` propagate."""
    cut = cutoff if isinstance(cutoff, Cutoff) else app_cutoff(cutoff)
    task = asyncio.ensure_future(wait)
    if cut.passed:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return None
    watcher = asyncio.ensure_future(cut.wait())
    try:
        await asyncio.wait([task, watcher], return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return task.result() if not task.cancelled() else None
