"""Sending deliveries: signed per Standard Webhooks, through the SSRF guard, every attempt
logged, retried with exponential backoff within a window, failing subscriptions disabled
(docs/api.md, "Event subscriptions").

Each pass (:meth:`DeliverySender.send_due`) takes every enabled subscription that is not
backing off and sends, for each of its ordering keys (a run, or a workflow for workflow
events), the oldest pending delivery when it is due: deliveries of one run reach the
receiver one at a time, in the order the engine wrote their events, and a later one is
never sent before an earlier one was acknowledged (a 2xx answer) or given up.

- A 2xx answer marks the delivery ``delivered``; it is never sent again unless someone
  re-sends it by hand. Anything else (another status, a timeout, a refused address) is a
  failed attempt: the delivery's next attempt waits ``retry_initial * 2**(n-1)`` seconds
  (``n``: its failed attempts so far) capped at ``retry_max``, and once it is older than
  ``retry_window`` it is given up (``failed``; the run's next delivery goes next).
- A pass in which every attempt to a subscription failed counts one consecutive failure
  and holds the subscription back by the same backoff (an endpoint that is down is probed,
  not flooded); any acknowledged delivery resets the count. At ``disable_after``
  consecutive failures the subscription is disabled, the change audited
  (``event_subscription.disable``) and its owner told on the workflows page
  (:func:`backend.services.subscriptions.manage.disabled_notices`) until it is re-enabled.

Each request carries ``webhook-id`` (``msg_`` and the delivery id's 32 hex digits, the
delivery log's ``webhook_id``; the same on every attempt:
receivers drop a repeat by it), ``webhook-timestamp`` (seconds, the attempt's time) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256>`` of ``id.timestamp.body``, computed by
the ``standardwebhooks`` library with the subscription's secret).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from standardwebhooks.webhooks import Webhook

from backend import crypto
from backend.db.models import DeliveryAttempt, EventDelivery, EventSubscription
from backend.services import audit
from backend.services.outbound import ssrf_policy
from backend.settings import Settings
from connectors.host.outbound import make_http_client

log = logging.getLogger(__name__)

RESPONSE_EXCERPT = 1000
"""Characters of a receiver's answer kept with the attempt."""


@dataclass(frozen=True)
class RetryPolicy:
    """Seconds: the first retry's wait (``initial``, doubling per failed attempt, at most
    ``maximum``), how long a delivery is retried (``window``); ``disable_after``: passes in
    a row with nothing acknowledged before a subscription is disabled; ``timeout``: one
    request's limit."""

    initial: float = 30.0
    maximum: float = 3600.0
    window: float = 86400.0
    disable_after: int = 30
    timeout: float = 10.0

    def backoff(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure in a row (1-based)."""
        return float(min(self.maximum, self.initial * 2 ** max(failures - 1, 0)))


MAX_RESPONSE_BYTES = 64 * 1024
"""The most of a receiver's answer read (the log keeps :data:`RESPONSE_EXCERPT`)."""


def retry_policy(settings: Settings) -> RetryPolicy:
    """The retry and disabling rules from settings (``RAILYARD_EVENT_DELIVERY_*``,
    ``RAILYARD_EVENT_SUBSCRIPTION_DISABLE_AFTER``)."""
    return RetryPolicy(
        initial=settings.event_delivery_retry_initial,
        maximum=settings.event_delivery_retry_max,
        window=settings.event_delivery_retry_window,
        disable_after=settings.event_subscription_disable_after,
        timeout=settings.event_delivery_timeout,
    )


def delivery_client(settings: Settings) -> httpx.AsyncClient:
    """The HTTP client outgoing events go through: the settings' SSRF policy (checked
    before each request and at connect time), the request timeout, no redirects followed,
    the answer capped at :data:`MAX_RESPONSE_BYTES`. The caller closes it."""
    return make_http_client(
        ssrf_policy(settings),
        timeout=settings.event_delivery_timeout,
        max_response_bytes=MAX_RESPONSE_BYTES,
    )


def secret_aad(subscription_id: uuid.UUID) -> bytes:
    """Associated data binding an encrypted signing secret to its subscription."""
    return b"event_subscription:" + str(subscription_id).encode()


MESSAGE_ID_PREFIX = "msg_"


def message_id(delivery_id: uuid.UUID) -> str:
    """The ``webhook-id`` of a delivery, the same on every attempt and re-send:
    ``msg_`` and the delivery's id as 32 lower-case hex digits, without dashes (the form
    it has had since the first delivery was sent: a receiver dedupes by it)."""
    return f"{MESSAGE_ID_PREFIX}{delivery_id.hex}"


@dataclass(frozen=True)
class Outcome:
    """What one attempt got: ``status_code`` and ``response`` excerpt, or ``error``."""

    status_code: int | None
    response: str
    error: str | None
    duration_ms: int

    @property
    def acknowledged(self) -> bool:
        """A 2xx answer."""
        return self.status_code is not None and 200 <= self.status_code < 300


async def post(
    client: httpx.AsyncClient, url: str, secret: str, delivery_id: uuid.UUID, body: bytes
) -> Outcome:
    """POST ``body`` signed with ``secret`` to ``url`` once; never raises for the
    receiver's or the network's faults (they are the :class:`Outcome`)."""
    msg_id = message_id(delivery_id)
    now = datetime.now(UTC)
    headers = {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, now, body),
    }
    started = time.monotonic()
    try:
        answer = await client.post(url, content=body, headers=headers)
        return Outcome(answer.status_code, answer.text[:RESPONSE_EXCERPT], None, _ms(started))
    except Exception as exc:  # refused by the SSRF guard, timeout, connection refused
        return Outcome(None, "", f"{type(exc).__name__}: {exc}"[:RESPONSE_EXCERPT], _ms(started))


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


class DeliverySender:
    """Sends due deliveries (see the module doc). ``client``: the SSRF-guarded HTTP client
    (:func:`backend.services.outbound.guarded_transport`); ``now``: the clock."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        client: httpx.AsyncClient,
        policy: RetryPolicy,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        concurrency: int = 8,
        heads: int = 100,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.client = client
        self.policy = policy
        self.now = now
        self.slots = asyncio.Semaphore(concurrency)
        self.heads = heads

    async def send_due(self) -> int:
        """One pass over every subscription; returns how many deliveries were
        acknowledged or given up (0: nothing moved)."""
        now = self.now()
        async with self.sessionmaker() as session:
            subs = list(
                (
                    await session.execute(
                        select(EventSubscription).where(
                            EventSubscription.enabled.is_(True),
                            (EventSubscription.retry_at.is_(None))
                            | (EventSubscription.retry_at <= now),
                        )
                    )
                ).scalars()
            )
        moved = await asyncio.gather(*(self._subscription(sub, now) for sub in subs))
        return sum(moved)

    async def _subscription(self, sub: EventSubscription, now: datetime) -> int:
        async with self.sessionmaker() as session:
            heads = list(
                (
                    await session.execute(
                        select(EventDelivery)
                        .where(
                            EventDelivery.subscription_id == sub.id,
                            EventDelivery.status == "pending",
                        )
                        .order_by(EventDelivery.ordering_key, EventDelivery.source_id)
                        .ext(distinct_on(EventDelivery.ordering_key))
                        .limit(self.heads)
                    )
                ).scalars()
            )
        window = timedelta(seconds=self.policy.window)
        expired = [h for h in heads if h.created_at + window <= now]
        if expired:
            await self._give_up(expired)
        due = [h for h in heads if h.next_attempt_at <= now and h not in expired]
        if not due:
            return len(expired)
        secret = crypto.decrypt(sub.secret, aad=secret_aad(sub.id)).decode()
        outcomes = await asyncio.gather(*(self._attempt(sub, secret, d) for d in due))
        acknowledged = sum(o.acknowledged for o in outcomes)
        await self._settle_subscription(sub.id, acknowledged > 0, now)
        return acknowledged + len(expired)

    async def _attempt(self, sub: EventSubscription, secret: str, d: EventDelivery) -> Outcome:
        async with self.slots:
            outcome = await post(self.client, sub.url, secret, d.id, d.body)
        async with self.sessionmaker() as session, session.begin():
            await record_attempt(session, d.id, outcome, self.policy, self.now())
        return outcome

    async def _give_up(self, expired: list[EventDelivery]) -> None:
        async with self.sessionmaker() as session, session.begin():
            await session.execute(
                update(EventDelivery)
                .where(
                    EventDelivery.id.in_([d.id for d in expired]),
                    EventDelivery.status == "pending",
                )
                .values(status="failed")
            )

    async def _settle_subscription(
        self, subscription_id: uuid.UUID, alive: bool, now: datetime
    ) -> None:
        """Reset the failure count after an acknowledged delivery, else count one and back
        off (disabling at ``disable_after``)."""
        async with self.sessionmaker() as session, session.begin():
            sub = await session.get(EventSubscription, subscription_id, with_for_update=True)
            if sub is None or not sub.enabled:
                return
            if alive:
                sub.consecutive_failures, sub.retry_at = 0, None
                return
            sub.consecutive_failures += 1
            wait = self.policy.backoff(sub.consecutive_failures)
            sub.retry_at = now + timedelta(seconds=wait)
            if sub.consecutive_failures >= self.policy.disable_after:
                await disable(session, sub, now, self.policy.disable_after)


async def record_attempt(
    session: AsyncSession,
    delivery_id: uuid.UUID,
    outcome: Outcome,
    policy: RetryPolicy,
    at: datetime,
    *,
    manual: bool = False,
) -> None:
    """Log one attempt and move its delivery: ``delivered`` on a 2xx, else its next
    attempt after the backoff (a manual re-send changes a delivered delivery only by the
    log line, and a given-up one back to ``delivered`` when acknowledged); in the
    caller's transaction."""
    d = await session.get(EventDelivery, delivery_id, with_for_update=True)
    if d is None:
        return
    d.attempts += 1
    session.add(
        DeliveryAttempt(
            delivery_id=d.id,
            number=d.attempts,
            at=at,
            status_code=outcome.status_code,
            response=outcome.response,
            error=outcome.error,
            duration_ms=outcome.duration_ms,
            manual=manual,
        )
    )
    if outcome.acknowledged:
        if d.status != "delivered":
            d.status, d.delivered_at = "delivered", at
    elif d.status == "pending":
        failed = await session.scalar(
            select(text("count(*)"))
            .select_from(DeliveryAttempt)
            .where(
                DeliveryAttempt.delivery_id == d.id,
                DeliveryAttempt.manual.is_(False),
                DeliveryAttempt.status_code.is_(None)
                | (DeliveryAttempt.status_code < 200)
                | (DeliveryAttempt.status_code >= 300),
            )
        )
        d.next_attempt_at = at + timedelta(seconds=policy.backoff(int(failed or 0)))


async def disable(
    session: AsyncSession, sub: EventSubscription, now: datetime, failures: int
) -> None:
    """Disable ``sub`` after ``failures`` consecutive failed passes (audited; the owner's
    notice is the disabled subscription itself, shown until it is re-enabled)."""
    sub.enabled = False
    sub.disabled_at = now
    sub.disabled_reason = (
        f"disabled after {failures} consecutive failed delivery passes; the last error is in "
        "the delivery log"
    )
    sub.retry_at = None
    await audit.record(
        session,
        "event_subscription.disable",
        "event_subscription",
        sub.id,
        before={"enabled": True},
        after={"enabled": False},
        details={"url": sub.url, "consecutive_failures": sub.consecutive_failures},
    )
    log.warning("event subscription %s to %s disabled: %s", sub.id, sub.url, sub.disabled_reason)
