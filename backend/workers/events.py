"""The events process: broker and email subscriptions of connector triggers.

``railyard events`` (and ``railyard dev``, in-process) runs
:class:`backend.services.triggers.events.listeners.Listeners` until stopped. It serves no HTTP and
runs no steps: scale it out by running more (each subscription is held by one process
at a time, through a lease in PostgreSQL, and taken over within the lease,
``RAILYARD_SUBSCRIPTION_LEASE_SECONDS`` (30 s), when its holder dies). A lost database
only pauses it: the listener passes retry, and the broker keeps what is not acked.
"""

from __future__ import annotations

import asyncio

from backend.runtime import Runtime
from backend.services.runs.execution import worker_name
from backend.services.triggers.events.listeners import Listeners


async def run_events(runtime: Runtime, stop: asyncio.Event) -> None:
    """Hold and run this process's share of the subscriptions until ``stop`` is set, each
    under a lease of ``runtime.settings.subscription_lease_seconds``."""
    owner = f"events:{worker_name()}"
    listeners = Listeners(
        runtime.events,
        runtime.execution.clock,
        owner,
        lease_seconds=runtime.settings.subscription_lease_seconds,
    )
    await listeners.run(stop)
