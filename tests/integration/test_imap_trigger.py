"""Email received, run by the product: a published workflow's IMAP subscription (the event
service's listeners, real PostgreSQL, Redis and Dovecot) starts one run per message, a
copy of a message (same Message-ID) starts none, and a listener started again delivers
only what arrived since."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from sqlalchemy import select

from backend.db.models import Run
from backend.runtime import Runtime
from backend.services.triggers.events.listeners import Listeners
from tests.imap_server import Dovecot
from tests.integration.mailbox import mail, published_watch

pytestmark = pytest.mark.integration


async def subjects(runtime: Runtime, workflow_id: str, count: int) -> list[str]:
    """The subjects of the workflow's runs, oldest first, once there are ``count``."""
    for _ in range(200):
        async with runtime.sessionmaker() as session:
            runs = list(
                (
                    await session.execute(
                        select(Run)
                        .where(Run.workflow_id == uuid.UUID(workflow_id))
                        .order_by(Run.created_at)
                    )
                ).scalars()
            )
        if len(runs) >= count:
            assert {r.trigger for r in runs} == {"email"}
            return [r.input["headers"]["subject"] for r in runs]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} runs never came")


async def test_email_received_through_the_event_service(
    runtime: Runtime, client: httpx.AsyncClient, imap_server: Dovecot
) -> None:
    user = imap_server.add_user()
    for n in (1, 2, 1):  # the third is a copy of the first: the same Message-ID
        await asyncio.to_thread(user.deliver, mail(n))
    wf = await published_watch(client, user, mark_seen=True, check_every=1)
    listeners = Listeners(runtime.events, runtime.execution.clock, "test-owner", lease_seconds=5)
    await listeners.reconcile()
    try:
        assert await subjects(runtime, wf["id"], 2) == ["Order 1", "Order 2"]
        for _ in range(100):  # all three marked once their (one or two) runs are stored
            flags = await asyncio.to_thread(user.flags)
            if all("\\Seen" in f for f in flags.values()):
                break
            await asyncio.sleep(0.05)
        assert len(flags) == 3 and all("\\Seen" in f for f in flags.values())
    finally:
        await listeners.stop()
    await asyncio.to_thread(user.deliver, mail(3))  # while nobody listens
    again = Listeners(runtime.events, runtime.execution.clock, "test-owner", lease_seconds=5)
    await again.reconcile()
    try:
        assert await subjects(runtime, wf["id"], 3) == ["Order 1", "Order 2", "Order 3"]
        await asyncio.sleep(0.5)
        assert len(await subjects(runtime, wf["id"], 3)) == 3  # nothing delivered twice
    finally:
        await again.stop()
