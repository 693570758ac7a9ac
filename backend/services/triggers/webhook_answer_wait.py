"""The seam of a waiting webhook's speed devices (``respond_node`` and ``last_step``).

A webhook whose caller waits for the run's answer gets it sooner by two devices, kept
here so the delivery's sequence (backend/services/triggers/webhook_delivery.py) reads without them:

- **early subscription**: the run's notices are watched *before* the run is stored (the
  delivery chooses the run's id), so no notice can pass between the store and the
  watch and the first read of the run can be skipped
  (:func:`backend.services.runs.run_watch.early_watch`);
- **eager first step**: while this process has room
  (backend/services/runs/execution/eager.py), the start may claim the run's one ready
  action step for this process to run itself; the notices of a run executed here need
  no Redis subscription. When the start did not claim it after all, the watch goes
  remote (subscribes on Redis) before the run is read, unless the run already ended.

A run queued behind its workflow's concurrency limit is answered 202 at once, and an
idempotent replay (an earlier run) is read, not watched.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.engine.states import RunStatus
from backend.services.runs import run_watch
from backend.services.runs.execution import Execution, StartedRun

__all__ = ["AnswerWait"]


class AnswerWait:
    """One delivery's wait for its run's answer; ``waits`` False: the caller gets 202 and
    nothing is watched. Use :meth:`watching` around the start, then :meth:`answer`."""

    def __init__(
        self,
        execution: Execution,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: Redis,
        *,
        waits: bool,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.redis = redis
        self.waits = waits
        self.here = waits and execution.eager.has_room()
        """The run may be executed here: watch this process's notices only, at first."""
        self.watched: run_watch.NoticeWait | None = None

    @property
    def eager(self) -> bool:
        """Whether the start may claim the run's first action step for this process."""
        return self.waits

    @asynccontextmanager
    async def watching(self, run_id: uuid.UUID) -> AsyncIterator[uuid.UUID]:
        """Within the block, the notices of the run to be started as ``run_id`` (yielded)
        are watched (when the caller waits)."""
        async with run_watch.early_watch(
            self.redis, run_id, enabled=self.waits, remote=not self.here
        ) as watched:
            self.watched = watched
            try:
                yield run_id
            finally:
                self.watched = None

    def answer(
        self, started: StartedRun, timeout: float, *, last_step: bool, failure_detail: bool
    ) -> Awaitable[dict[str, Any] | None] | None:
        """The wait for ``started``'s answer (``None`` from it on timeout), or ``None``
        when there is none to wait for (the caller does not wait, the run is queued)."""
        if not self.waits or started.status == "queued":
            return None
        return self._answer(started, timeout, last_step, failure_detail)

    async def _answer(
        self, started: StartedRun, timeout: float, last_step: bool, failure_detail: bool
    ) -> dict[str, Any] | None:
        watched, late = self.watched, False
        if watched is not None and not watched.remote and started.eager is None:
            late = True  # not executed here after all: read the run first ...
            if not RunStatus(started.status).terminal:
                await watched.go_remote()  # ... having subscribed, unless it ended
        return await run_watch.wait_for_answer(
            self.sessionmaker,
            self.redis,
            started.run_id,
            timeout,
            last_step=last_step,
            # an idempotent replay returns an earlier run: not the one subscribed
            watched=watched if started.created else None,
            started_status=None if late else started.status,
            failure_detail=failure_detail,
        )
