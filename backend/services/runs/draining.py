"""A stopping worker's hand-back of its running attempts (graceful shutdown).

When a worker process is asked to stop (SIGTERM: ``railyard worker``, a Kubernetes pod
being deleted, ``docker compose stop``) it *drains* (backend/workers/worker.py,
:func:`~backend.workers.worker.stop_worker`):

1. :meth:`Drain.begin`: it takes no new work. Its poll loop stops, a job it already took
   but has not claimed goes back to the queue for another worker, and completing a step
   no longer claims the next step for this worker (the next step is dispatched instead).
2. Running attempts get the grace period (``RAILYARD_SHUTDOWN_GRACE``) to finish and are
   completed as usual.
3. :meth:`Drain.hand_back`: attempts still running then are stopped (the connector's
   ``is_cancelled()`` turns true, its task is cancelled) and *handed back*: the attempt is
   closed as ``released`` (error kind ``worker_shutdown``) and its step made ready and
   dispatched at once, so another worker runs it now rather than after the lease runs
   out (the released attempt counts like a lease expiry's). The attempt's fencing token
   keeps a late completion of the stopped attempt from being recorded: a step completes
   exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Any

from backend.services.runs.cancellation import Stopper

log = logging.getLogger(__name__)

HAND_BACK_SECONDS = 3.0
"""How long, in seconds, a stopping process waits after the grace period for the attempts
it stopped to be handed back (one short transaction each) before it cancels what is left."""


class Drain:
    """The draining state of one worker process and the stoppers of its attempts, by
    attempt id (one per process, on the execution ``Env``)."""

    def __init__(self) -> None:
        self.draining = False
        self._running: dict[int, Stopper] = {}
        self._handed_back: set[int] = set()

    def begin(self) -> None:
        """Take no new work from now on (idempotent)."""
        self.draining = True

    def register(self, attempt_id: int, stop: Stopper) -> Callable[[], None]:
        """Register the stopper of running attempt ``attempt_id``; returns the function
        that unregisters it (call it when the attempt ends)."""
        self._running[attempt_id] = stop

        def unregister() -> None:
            if self._running.get(attempt_id) is stop:
                del self._running[attempt_id]

        return unregister

    def hand_back(self) -> int:
        """Stop every attempt running here, marking each as handed back; returns how many.

        Implies :meth:`begin`."""
        self.draining = True
        running = list(self._running.items())
        for attempt_id, stop in running:
            self._handed_back.add(attempt_id)
            stop()
        return len(running)

    def handed_back(self, attempt_id: int) -> bool:
        """True when :meth:`hand_back` stopped attempt ``attempt_id``."""
        return attempt_id in self._handed_back

    def running(self) -> int:
        """How many attempts are running in this process."""
        return len(self._running)


async def finish_or_hand_back(
    drain: Drain,
    tasks: Collection[asyncio.Task[Any]],
    grace_seconds: float,
    *,
    hand_back_seconds: float = HAND_BACK_SECONDS,
) -> list[asyncio.Task[Any]]:
    """Steps 2 to 4 of a drain (the module doc) over ``tasks``, the tasks running this
    process's attempts (a worker's jobs, an API's eager runs): give them ``grace_seconds``
    to finish, then hand back the attempts still running (:meth:`Drain.hand_back`) and give
    the hand-back writes ``hand_back_seconds``, then cancel what is left (the sweeper
    recovers such a step when its lease runs out). Returns the tasks it cancelled."""
    running = [t for t in tasks if not t.done()]
    if running:
        log.info("stopping: %d task(s) running, grace %g s", len(running), grace_seconds)
        await asyncio.wait(running, timeout=grace_seconds)
    left = [t for t in running if not t.done()]
    if left:
        handed = drain.hand_back()
        log.warning("grace period over: handing back %d running attempt(s)", handed)
        await asyncio.wait(left, timeout=hand_back_seconds)
        left = [t for t in left if not t.done()]
    for task in left:
        task.cancel()
    if left:
        log.warning("tasks cancelled at shutdown; the sweeper will re-dispatch their steps")
    return left
