"""Ports: what the engine needs from the outside world, as Protocols.

Adapters live outside the core: ``backend.workers.dispatch`` (arq) implements
:class:`Dispatcher`, ``backend.services.catalog`` implements :class:`ConnectorRegistry`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol


class Dispatcher(Protocol):
    """Transport of work to workers. Losing a job is allowed: the sweeper re-dispatches."""

    async def dispatch_step(self, run_id: str, step_id: str, *, delay: float | None = None) -> None:
        """Ask a worker to execute ready step ``step_id``, after ``delay`` seconds if given."""
        ...

    async def dispatch_advance(self, run_id: str) -> None:
        """Ask a worker to advance run ``run_id``."""
        ...

    async def notify(self, run_id: str) -> None:
        """Tell listeners (live pages, waiting webhooks) that run ``run_id`` changed."""
        ...


class Clock(Protocol):
    """Source of the current time (tests drive a fake one)."""

    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""
        ...


class SystemClock:
    """The real UTC clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ActionRunner(Protocol):
    """One executable action node type."""

    def run(self, config: dict[str, Any], input: Any, context: Any) -> Awaitable[Any]:
        """Run once with resolved ``config`` and ``input``; raises the SDK's errors."""
        ...


class ConnectorRegistry(Protocol):
    """Lookup of executable action node types by node type name and version."""

    def action(self, node_type: str, version: int = 1) -> ActionRunner | None:
        """The runner of ``node_type`` at ``version`` (the version the step's graph pins),
        or ``None`` when no installed connector provides it."""
        ...


HeartbeatFn = Callable[[Any], Awaitable[None]]
