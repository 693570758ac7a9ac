"""Eager execution: a waiting caller's run executed by the process that started it.

A run started by a caller that waits for its answer (a webhook answering with the last
step's output or a Respond step's answer) whose start leaves exactly one action step
ready now does not send that step through the queue to a worker: the starting process
claims it in the run's insert and runs it in a task of its own, then the steps each
completion claims, with the same use case code a worker runs
(:meth:`backend.services.runs.execution.steps.Steps.run_claimed`). Temporal calls this eager
workflow start; it saves the queue hop (enqueue, pickup, the worker's read and claim) and
the notice back to the waiting process.

:class:`EagerRuns` is the per-process budget (``RAILYARD_EAGER_RUNS``): at most ``limit``
eager runs at once; over it, and while the process drains (graceful shutdown), the step
is dispatched through the queue as before. Recovery is a worker's: the attempt holds a
lease renewed while it runs, so if the process dies the sweeper expires the lease and the
step is ready again without using up a retry (docs/engine.md, "Eager execution").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from backend.services.runs.draining import Drain, finish_or_hand_back

log = logging.getLogger(__name__)


class EagerRuns:
    """The eager runs of one process, bounded by ``limit`` (0: none; see the module doc).

    A start that may run eagerly first :meth:`reserve`\\ s a place (before it writes, so
    concurrent starts never exceed the limit), then either :meth:`spawn`\\ s the run's step
    loop in it or :meth:`release`\\ s it. ``drain`` is the process's graceful-shutdown
    state: no place is given while it drains."""

    def __init__(self, drain: Drain, limit: int = 0) -> None:
        self.drain = drain
        self.limit = limit
        self.on_end: Callable[[str], None] | None = None
        """Called with the run id when an eager run's task ends, whether the run ended or
        left the process (its next step dispatched to a worker, handed back): the
        process's waits for the run then listen beyond it (backend/services/runs/run_watch.py,
        ``RunNotices.run_left``). Set where the process is put together."""
        self._places = 0  # reserved or running
        self._tasks: dict[asyncio.Task[None], str] = {}

    def has_room(self) -> bool:
        """Whether :meth:`reserve` would give a place now (another start may take it
        first)."""
        return not self.drain.draining and self._places < self.limit

    def reserve(self) -> bool:
        """Take a place for one eager run; False when the budget is full, off, or the
        process drains."""
        if not self.has_room():
            return False
        self._places += 1
        return True

    def release(self) -> None:
        """Give back a place :meth:`reserve` took that no run uses."""
        self._places = max(self._places - 1, 0)

    def spawn(self, run: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``run`` (a run's step loop) in a task holding a reserved place until it
        ends; an error it raises is logged (its step stays ready or its lease runs out in
        PostgreSQL, and the sweeper hands it to a worker)."""
        task = asyncio.create_task(run, name=f"eager {name}")
        self._tasks[task] = name
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        name = self._tasks.pop(task, "")
        self.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("eager run %s failed", task.get_name(), exc_info=task.exception())
        if self.on_end is not None:
            self.on_end(name)

    def running(self) -> int:
        """How many eager runs are running in this process."""
        return len(self._tasks)

    async def stop(self, grace_seconds: float) -> list[asyncio.Task[None]]:
        """Stop taking eager runs and drain the running ones like a stopping worker
        (:func:`~backend.services.runs.draining.finish_or_hand_back`): ``grace_seconds`` to
        finish, then their attempts handed back to workers. Returns the tasks cancelled."""
        self.drain.begin()
        tasks = list(self._tasks)
        left = await finish_or_hand_back(self.drain, tasks, grace_seconds)
        await asyncio.gather(*tasks, return_exceptions=True)
        return left
