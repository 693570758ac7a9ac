"""Stopping running attempts at once when their run is cancelled or times out.

Ending a run marks its running attempts ``cancelled`` in PostgreSQL (the truth). The
worker running such an attempt must also stop the connector call itself, within a second,
not at its next heartbeat (a third of the lease, 20 s by default). So:

- every process keeps a :class:`CancelWatch`, the attempts it is running by run id;
- the process that ended the run stops its own attempts of it directly and publishes the
  run id on :data:`~backend.services.runs.channels.CANCEL_CHANNEL` (Redis pub/sub, through the
  Dispatcher port's ``announce_cancel``);
- every worker listens on that channel (backend/workers/run_control.py) and stops its
  attempts of that run: the SDK's ``is_cancelled()`` turns true and the action's task is
  cancelled, which closes its HTTP connection (the remote end sees the disconnect).

Redis is transport only: a lost notice leaves the heartbeat (lease renewal refused) as
the backstop, so an attempt still stops within a third of the lease.
"""

from __future__ import annotations

from collections.abc import Callable

Stopper = Callable[[], None]
"""Stops one running attempt (idempotent)."""


class CancelWatch:
    """The stoppers of the attempts this process runs, by run id (one per process)."""

    def __init__(self) -> None:
        self._running: dict[str, set[Stopper]] = {}

    def register(self, run_id: str, stop: Stopper) -> Callable[[], None]:
        """Register ``stop`` for an attempt of run ``run_id``; returns the function that
        unregisters it (call it when the attempt ends)."""
        stoppers = self._running.setdefault(run_id, set())
        stoppers.add(stop)

        def unregister() -> None:
            stoppers.discard(stop)
            if not stoppers and self._running.get(run_id) is stoppers:
                del self._running[run_id]

        return unregister

    def cancel(self, run_id: str) -> int:
        """Stop every attempt of run ``run_id`` running here; returns how many."""
        stoppers = list(self._running.get(run_id, ()))
        for stop in stoppers:
            stop()
        return len(stoppers)

    def running_runs(self) -> set[str]:
        """Ids of the runs with an attempt running in this process."""
        return set(self._running)
