"""Broker and email subscriptions: long-lived ``listen`` calls, one holder each.

An events process (``railyard events``, and ``railyard dev``) runs :class:`Listeners`:
every :attr:`Listeners.renew_every` seconds it claims the enabled broker and email
subscriptions that nobody holds (or whose holder's lease ran out) and renews the leases
it holds (``lease_owner`` / ``lease_until``, :data:`LEASE_SECONDS`), in one transaction
with ``FOR UPDATE SKIP LOCKED``. For each subscription it holds it runs the trigger's
``listen(config, emit)``: when that returns or raises (the broker went away), it is
called again after a backoff (1 s doubling up to a minute) and the error is shown on the
workflow page; when the subscription changes revision (a publish) or is disabled
(archived), the call is cancelled and, if still held, started again with the new config.

:class:`SubscriptionEmit` is the ``emit`` a listener gets: ``await emit(event)`` stores the
event in the inbox and starts its run, and only then returns, so the connector acks a
message only after its run is stored. A process killed before the ack leaves the
message with the broker, which redelivers it; the inbox keeps that to one run. An event
the inbox cannot store (no id, unstorable data) and anything handed to
``emit.dead_letter`` is kept as a dead letter, shown on the workflow page, then acked.
A listener may keep many messages in flight (``emit`` called again before an earlier call
returned, each message acked when its own call returns): the events waiting at the same
moment are stored and started together, a few statements for the whole group, so a busy
subscription is not held to one commit round trip per message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update

from backend.db.models import TriggerSubscription
from backend.engine.ports import Clock
from backend.observability import metrics
from backend.services.availability import database_unavailable
from backend.services.triggers.events.contexts import EventEnv, TriggerSite
from backend.services.triggers.events.inbox import (
    EventBatches,
    InvalidEvent,
    Source,
    encode_event,
    insert_dead_letter,
)
from backend.services.triggers.events.kinds import LISTEN_KINDS
from backend.services.triggers.events.subscriptions import backoff, connector_config
from connectors import sdk

log = logging.getLogger(__name__)

LEASE_SECONDS = 30.0
"""How long a claimed subscription stays with its events process without a renewal, by
default (``railyard events`` takes ``RAILYARD_SUBSCRIPTION_LEASE_SECONDS``)."""

LAST_EVENT_EVERY = 1.0
"""Seconds between two writes of a subscription's ``last_event_at`` under load."""


@dataclass(frozen=True)
class Held:
    """A subscription this process holds (a snapshot of what its listener runs)."""

    id: uuid.UUID
    site: TriggerSite
    kind: str
    config: dict[str, Any]


class SubscriptionEmit:
    """The ``emit`` handed to one subscription's ``listen`` (see the module doc)."""

    def __init__(self, env: EventEnv, held: Held, clock: Clock) -> None:
        self.env = env
        self.held = held
        self.clock = clock
        self.source = Source(
            held.site.workflow_id, held.site.version_number, held.site.node_type, held.kind
        )
        self.batches = EventBatches(env.sessionmaker, env.execution, self.source)
        self._touched: datetime | None = None

    async def __call__(self, event: sdk.TriggerEvent) -> None:
        """Store ``event`` and start its run; returns once both are durable. Calls may
        overlap: the events of concurrent calls are stored and started together
        (:class:`~backend.services.triggers.events.inbox.EventBatches`)."""
        try:
            encoded = encode_event(event)
        except InvalidEvent as exc:
            raw = getattr(event, "data", None)
            await self.dead_letter(str(exc), repr(raw)[:65536], dict(getattr(event, "meta", {})))
            return
        row_id = await self.batches.submit(encoded)
        new = int(row_id is not None)
        metrics.trigger_events(self.held.kind, self.held.site.node_type, new, 1 - new)
        if new:
            await self._touch(self.clock.now())

    async def dead_letter(self, reason: str, raw: bytes | str, meta: dict[str, str]) -> None:
        """Keep a message no event could be made of; returns once it is stored."""
        async with self.env.sessionmaker() as session, session.begin():
            await insert_dead_letter(session, self.source, reason, raw, meta, self.clock.now())
        metrics.trigger_dead_letter(self.held.site.node_type)

    async def _touch(self, now: datetime) -> None:
        if self._touched is not None and (now - self._touched).total_seconds() < LAST_EVENT_EVERY:
            return
        self._touched = now
        async with self.env.sessionmaker() as session, session.begin():
            await session.execute(
                update(TriggerSubscription)
                .where(TriggerSubscription.id == self.held.id)
                .values(last_event_at=now, failures=0, last_error=None, last_error_at=None)
            )


class Listeners:
    """Holds and runs this process's share of the broker and email subscriptions."""

    def __init__(
        self,
        env: EventEnv,
        clock: Clock,
        owner: str,
        *,
        lease_seconds: float = LEASE_SECONDS,
        limit: int = 200,
    ) -> None:
        self.env = env
        self.clock = clock
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.limit = limit
        self.running: dict[uuid.UUID, tuple[Held, asyncio.Task[None]]] = {}
        self._renewed: dict[uuid.UUID, datetime] = {}

    @property
    def renew_every(self) -> float:
        """Seconds between two claim-and-renew passes (a third of the lease)."""
        return self.lease_seconds / 3

    async def claim(self) -> dict[uuid.UUID, Held]:
        """Claim free subscriptions and renew this process's leases; returns what it holds."""
        now = self.clock.now()
        held: dict[uuid.UUID, Held] = {}
        async with self.env.sessionmaker() as session, session.begin():
            rows = (
                await session.execute(
                    select(TriggerSubscription)
                    .where(
                        TriggerSubscription.enabled,
                        TriggerSubscription.kind.in_(LISTEN_KINDS),
                        or_(
                            TriggerSubscription.lease_owner == self.owner,
                            TriggerSubscription.lease_until.is_(None),
                            TriggerSubscription.lease_until < now,
                        ),
                    )
                    .order_by(TriggerSubscription.created_at)
                    .limit(self.limit)
                    .with_for_update(skip_locked=True)
                )
            ).scalars()
            for row in rows:
                row.lease_owner = self.owner
                row.lease_until = now + timedelta(seconds=self.lease_seconds)
                self._renewed[row.id] = now
                held[row.id] = Held(
                    row.id,
                    TriggerSite(
                        row.workflow_id,
                        row.version_number,
                        row.step_id,
                        row.node_type,
                        row.revision,
                    ),
                    row.kind,
                    dict(row.config),
                )
        # a row locked by someone else this instant (a publish) is still ours until the
        # lease we last took runs out
        margin = timedelta(seconds=self.lease_seconds * 0.8)
        for sub_id, (snapshot, _task) in self.running.items():
            renewed = self._renewed.get(sub_id)
            if sub_id not in held and renewed is not None and now - renewed < margin:
                held[sub_id] = snapshot
        return held

    async def reconcile(self) -> None:
        """One pass: claim, then start, restart or stop listeners to match."""
        held = await self.claim()
        for sub_id in list(self.running):
            snapshot, task = self.running[sub_id]
            if held.get(sub_id) != snapshot or task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                del self.running[sub_id]
        for sub_id, snapshot in held.items():
            if sub_id not in self.running:
                task = asyncio.create_task(self._listen(snapshot), name=f"listen {sub_id}")
                self.running[sub_id] = (snapshot, task)

    async def _listen(self, held: Held) -> None:
        definition = self.env.definition(held.site.node_type)
        emit = SubscriptionEmit(self.env, held, self.clock)
        failures = 0
        while True:
            error: BaseException | None = None
            began = asyncio.get_running_loop().time()
            try:
                if definition is None:
                    raise sdk.ConfigError(
                        f"the node type {held.site.node_type} is not installed on this server"
                    )
                await definition.call(
                    "listen", connector_config(held.config), self.env.context(held.site), emit
                )
                error = ConnectionError("the subscription ended (the server closed it)")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc
            # a subscription that held for a minute starts its backoff afresh
            healthy = asyncio.get_running_loop().time() - began > 60
            failures = 1 if healthy else failures + 1
            await self._record(held, error)
            await asyncio.sleep(min(60.0, backoff(failures, base=1.0).total_seconds()))

    async def _record(self, held: Held, error: BaseException) -> None:
        message = str(getattr(error, "message", None) or f"{type(error).__name__}: {error}")
        log.warning("subscription %s (%s) ended: %s", held.id, held.site.node_type, message)
        metrics.trigger_failure(held.kind, held.site.node_type)
        try:
            async with self.env.sessionmaker() as session, session.begin():
                await session.execute(
                    update(TriggerSubscription)
                    .where(
                        TriggerSubscription.id == held.id,
                        TriggerSubscription.revision == held.site.revision,
                    )
                    .values(
                        failures=TriggerSubscription.failures + 1,
                        last_error=message[:2000],
                        last_error_at=self.clock.now(),
                    )
                )
        except Exception as exc:  # the database is gone too: the log line says it
            if not database_unavailable(exc):
                log.exception("recording the subscription's error failed")

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile every :attr:`renew_every` seconds until ``stop`` is set, then cancel
        the listeners and let the leases go (another process takes them at once)."""
        try:
            while not stop.is_set():
                try:
                    await self.reconcile()
                except Exception:
                    log.exception("listener pass failed; retrying")
                try:
                    await asyncio.wait_for(stop.wait(), self.renew_every)
                except TimeoutError:
                    pass
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Cancel every listener and release this process's leases."""
        for _snapshot, task in self.running.values():
            task.cancel()
        for _snapshot, task in self.running.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.running.clear()
        with contextlib.suppress(Exception):
            async with self.env.sessionmaker() as session, session.begin():
                await session.execute(
                    update(TriggerSubscription)
                    .where(TriggerSubscription.lease_owner == self.owner)
                    .values(lease_owner=None, lease_until=None)
                )
