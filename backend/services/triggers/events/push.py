"""An app webhook delivery: verified by the connector, stored once, answered in time.

``POST /hooks/app/<token>`` (any method the vendor uses) reaches :func:`deliver`:

1. The subscription is found by its token: unknown answers 404, an archived or replaced
   trigger 410 (the vendor stops retrying).
2. A body over the webhook body limit answers 413 unread by the connector.
3. The connector's ``receive(config, request, registration)`` verifies it (signature,
   replay window), answers handshakes (Slack's ``url_verification``, a challenge echo) and
   returns the events; :class:`connectors.sdk.DeliveryRefused` answers its status
   (401 unsigned or mis-signed, replayed, 400 malformed) and starts nothing.
4. The events are stored in the inbox (a retried delivery's event id is already there:
   nothing new), then their runs are started while the vendor's deadline
   (``response_deadline``, Slack's 3 s) allows; a start that does not fit goes on after
   the answer and the sweep guarantees it. The answer is sent once the events are durable.

While the designer listens for a test event (:mod:`backend.services.triggers.events.samples`),
a delivery goes to the draft's ``receive`` first and its event is pinned as the sample;
a workflow that is not live (never published, or its published trigger is another)
answers with the draft's answer and starts nothing; a live one then goes on with step 3.

Every refusal is counted in ``railyard_trigger_deliveries_refused_total{reason}`` and
answered with the API's error body, problem details (:mod:`backend.problems`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import or_, select, update

from backend import crypto, problems
from backend.db.models import TriggerSubscription
from backend.observability import metrics
from backend.services.availability import database_unavailable
from backend.services.triggers.events import samples
from backend.services.triggers.events.contexts import EventEnv, TriggerSite
from backend.services.triggers.events.inbox import InvalidEvent, Source, insert_events, start_runs
from backend.services.triggers.events.subscriptions import connector_config
from connectors import sdk

log = logging.getLogger(__name__)

_background: set[asyncio.Task[Any]] = set()


@dataclass
class PushAnswer:
    """The HTTP answer to a delivery: status, body bytes, media type, extra headers."""

    status: int
    body: bytes
    media_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)


def registration_aad(workflow_id: Any) -> bytes:
    """Associated data binding an encrypted registration to its workflow."""
    return f"trigger-registration:{workflow_id}".encode()


def open_registration(workflow_id: Any, blob: bytes | None) -> sdk.Registration | None:
    """Decrypt a stored registration (``None`` when there is none)."""
    if blob is None:
        return None
    plain = crypto.decrypt(blob, aad=registration_aad(workflow_id))
    return msgspec.json.decode(plain, type=sdk.Registration)


def seal_registration(workflow_id: Any, registration: sdk.Registration) -> bytes:
    """Encrypt a registration for storage (AES-GCM, bound to its workflow)."""
    return crypto.encrypt(msgspec.json.encode(registration), aad=registration_aad(workflow_id))


def touched(subscription_id: Any, now: datetime) -> Any:
    """``UPDATE`` of the subscription's ``last_event_at`` to ``now``, skipped (no row
    lock taken) when it is less than a second old: a burst of deliveries to one trigger
    does not queue on its row."""
    return (
        update(TriggerSubscription)
        .where(
            TriggerSubscription.id == subscription_id,
            or_(
                TriggerSubscription.last_event_at.is_(None),
                TriggerSubscription.last_event_at < now - timedelta(seconds=1),
            ),
        )
        .values(last_event_at=now)
    )


def _problem(token: str, status: int, reason: str, detail: str) -> PushAnswer:
    """A refused delivery to ``/hooks/app/<token>``, answered with problem details."""
    metrics.trigger_refused(reason)
    return PushAnswer(
        status, problems.body(status, detail, f"/hooks/app/{token}"), problems.MEDIA_TYPE
    )


def _answer(response: sdk.PushResponse, run_ids: list[str]) -> PushAnswer:
    if response.body is None:
        return PushAnswer(response.status, b"", "text/plain", run_ids=run_ids)
    if isinstance(response.body, str):
        return PushAnswer(response.status, response.body.encode(), "text/plain", run_ids=run_ids)
    return PushAnswer(response.status, msgspec.json.encode(response.body), run_ids=run_ids)


async def deliver(
    env: EventEnv,
    token: str,
    *,
    method: str,
    headers: dict[str, str],
    query: dict[str, str],
    body: bytes,
    max_body: int,
) -> PushAnswer:
    """Handle one delivery to ``/hooks/app/<token>`` (see the module doc). Never raises
    but for a lost database (the route answers 503)."""
    received = time.monotonic()
    async with env.sessionmaker() as session:
        row = (
            await session.execute(
                select(TriggerSubscription).where(TriggerSubscription.token == token)
            )
        ).scalar_one_or_none()
    sampling = row is not None and samples.listening(row, datetime.now(UTC))
    if row is None or (row.kind != "app_webhook" and not sampling):
        return _problem(token, 404, "unknown", "no app webhook trigger at this URL")
    if not row.enabled and not sampling:
        return _problem(token, 410, "disabled", "this trigger is no longer active")
    if len(body) > max_body:
        return _problem(token, 413, "size", f"the body is larger than {max_body} bytes")
    request = sdk.PushRequest(
        method=method,
        headers={k.lower(): v for k, v in headers.items()},
        body=body,
        query=dict(query),
        received_at=time.time(),
        url=env.url(token),
    )
    live = row.enabled and row.kind == "app_webhook"
    if sampling:
        sampled = await _sample(env, row, request)
        if not live:
            return sampled
    definition = env.definition(row.node_type)
    if definition is None:
        return _problem(token, 503, "error", f"the node type {row.node_type} is not installed")
    site = TriggerSite(
        row.workflow_id, row.version_number, row.step_id, row.node_type, row.revision
    )
    deadline = float(getattr(definition, "response_deadline", 10.0))
    try:
        registration = open_registration(row.workflow_id, row.registration)
        response = await asyncio.wait_for(
            definition.call(
                "receive", connector_config(row.config), env.context(site), request, registration
            ),
            timeout=max(0.5, deadline * 0.6),
        )
        if not isinstance(response, sdk.PushResponse):
            raise TypeError(f"receive returned {type(response).__name__}, not PushResponse")
        now = datetime.now(UTC)
        ids: list[int] = []
        if response.events:  # a handshake or a filtered-out event writes nothing
            async with env.sessionmaker() as session, session.begin():
                source = Source(row.workflow_id, row.version_number, row.node_type, row.kind)
                ids = await insert_events(session, source, response.events, now)
                if ids:
                    await session.execute(touched(row.id, now))
        metrics.trigger_events(row.kind, row.node_type, len(ids), len(response.events) - len(ids))
    except sdk.DeliveryRefused as refused:
        return _problem(token, refused.status, refused.reason, refused.message)
    except TimeoutError:
        return _problem(token, 503, "error", "the trigger did not answer in time")
    except InvalidEvent as exc:
        return _problem(token, 502, "error", f"the trigger returned an invalid event: {exc}")
    except Exception as exc:
        if database_unavailable(exc):
            raise
        log.exception("app webhook %s (workflow %s) failed", row.node_type, row.workflow_id)
        metrics.trigger_failure(row.kind, row.node_type)
        return _problem(token, 502, "error", f"the trigger failed: {type(exc).__name__}: {exc}")
    run_ids = await _start_in_time(env, ids, deadline - (time.monotonic() - received))
    return _answer(response, run_ids)


async def _sample(env: EventEnv, row: TriggerSubscription, request: sdk.PushRequest) -> PushAnswer:
    """A delivery while the designer listens for a test event
    (:func:`backend.services.triggers.events.samples.take_delivery`): the answer the draft's trigger
    gives it (used when the workflow is not live, which starts no run)."""
    try:
        registration = open_registration(row.workflow_id, row.registration)
        response = await samples.take_delivery(env, row, request, registration)
    except sdk.DeliveryRefused as refused:
        return _problem(row.token, refused.status, refused.reason, refused.message)
    except samples.SampleFailed as failed:
        return _problem(row.token, failed.status, "error", failed.message)
    except Exception as exc:
        if database_unavailable(exc):
            raise
        log.exception("test event of workflow %s failed", row.workflow_id)
        return _problem(row.token, 502, "error", f"the trigger failed: {type(exc).__name__}: {exc}")
    return _answer(response, [])


async def _start_in_time(env: EventEnv, ids: list[int], budget: float) -> list[str]:
    """Start the runs of ``ids`` within ``budget`` seconds (less a margin for the answer);
    what does not fit goes on in the background (and the sweep makes it certain)."""
    if not ids:
        return []
    task = asyncio.ensure_future(start_runs(env.sessionmaker, env.execution, ids))
    try:
        linked = await asyncio.wait_for(asyncio.shield(task), timeout=max(0.05, budget - 0.3))
    except TimeoutError:
        _background.add(task)
        task.add_done_callback(_background.discard)
        return []
    except Exception as exc:  # stored: the sweep starts them
        log.warning("app webhook runs not started yet (the sweep will): %r", exc)
        return []
    return [str(linked[i]) for i in ids if i in linked]
