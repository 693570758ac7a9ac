"""App webhook lifecycle: hooks registered, checked and deleted at the vendor.

Runs in the scheduler's leader beside the poller. One pass (:func:`run_lifecycle_pass`):

- **register**: a subscription whose ``registration_status`` is ``pending`` or ``failed``
  and due (``next_check_at``) gets the connector's ``register(config, url)``; the
  :class:`connectors.sdk.Registration` it returns (remote id, secret) is stored encrypted
  and the status becomes ``registered``. A failure is kept on the workflow page
  (``last_error``) and retried with backoff (5 s doubling up to an hour).
- **check**: a registered subscription whose trigger has ``check`` is checked every
  :data:`CHECK_INTERVAL`; a hook the vendor lost is registered again.
- **retire**: every queued retirement (the version was replaced, the workflow archived)
  gets ``unregister(config, registration)`` with the config it was registered with,
  retried with backoff up to :data:`MAX_RETIRE_ATTEMPTS` times (then kept, with its
  error, for an admin to see).

A registration is written only if the subscription's revision is the one that was
registered (a publish meanwhile retires the new hook at once instead).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from backend.db.models import TriggerRetirement, TriggerSubscription
from backend.engine.ports import Clock
from backend.observability import metrics
from backend.services.availability import database_unavailable
from backend.services.triggers.events.contexts import EventEnv, TriggerSite
from backend.services.triggers.events.push import open_registration, seal_registration
from backend.services.triggers.events.subscriptions import backoff, connector_config
from connectors import sdk

log = logging.getLogger(__name__)

CHECK_INTERVAL = timedelta(hours=1)
"""How often a registered hook is checked at the vendor (when its trigger can check)."""

MAX_RETIRE_ATTEMPTS = 10
"""Attempts to delete a retired hook before it is left for an admin."""

HOOK_TIMEOUT = 30.0
"""Seconds a lifecycle hook may take."""


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}")[:2000]


async def _due(env: EventEnv, now: datetime) -> list[TriggerSubscription]:
    async with env.sessionmaker() as session:
        rows = (
            await session.execute(
                select(TriggerSubscription)
                .where(
                    TriggerSubscription.enabled,
                    TriggerSubscription.kind == "app_webhook",
                    TriggerSubscription.next_check_at <= now,
                    TriggerSubscription.registration_status.in_(
                        ("pending", "failed", "registered")
                    ),
                )
                .order_by(TriggerSubscription.next_check_at)
                .limit(50)
            )
        ).scalars()
        return list(rows)


async def _call(
    env: EventEnv, site: TriggerSite, hook: str, config: dict[str, Any], *args: Any
) -> Any:
    definition = env.definition(site.node_type)
    if definition is None:
        raise sdk.ConfigError(f"the node type {site.node_type} is not installed on this server")
    return await asyncio.wait_for(
        definition.call(hook, connector_config(config), env.context(site), *args), HOOK_TIMEOUT
    )


async def _register_or_check(env: EventEnv, row: TriggerSubscription, now: datetime) -> None:
    site = TriggerSite(
        row.workflow_id, row.version_number, row.step_id, row.node_type, row.revision
    )
    definition = env.definition(row.node_type)
    error: BaseException | None = None
    registration: sdk.Registration | None = None
    still_there = True
    try:
        if row.registration_status == "registered":
            current = open_registration(row.workflow_id, row.registration)
            if current is not None and getattr(definition, "check", None) is not None:
                still_there = bool(await _call(env, site, "check", row.config, current))
            if still_there:
                await _finish(env, row, now, None, keep=True)
                return
        registration = await _call(env, site, "register", row.config, env.url(row.token))
        if not isinstance(registration, sdk.Registration):
            raise TypeError(f"register returned {type(registration).__name__}, not Registration")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if database_unavailable(exc):
            raise
        error = exc
    await _finish(env, row, now, error, registration=registration, site=site)


async def _finish(
    env: EventEnv,
    row: TriggerSubscription,
    now: datetime,
    error: BaseException | None,
    *,
    keep: bool = False,
    registration: sdk.Registration | None = None,
    site: TriggerSite | None = None,
) -> None:
    async with env.sessionmaker() as session, session.begin():
        locked = await session.get(TriggerSubscription, row.id, with_for_update=True)
        stale = locked is None or locked.revision != row.revision or not locked.enabled
        if stale:
            if registration is not None:  # registered for a revision that is gone
                session.add(
                    TriggerRetirement(
                        workflow_id=row.workflow_id,
                        node_type=row.node_type,
                        config=row.config,
                        version_number=row.version_number,
                        registration=seal_registration(row.workflow_id, registration),
                        attempts=0,
                        next_attempt_at=now,
                    )
                )
            return
        assert locked is not None
        if error is not None:
            log.warning(
                "registering %s for workflow %s failed: %s",
                row.node_type,
                row.workflow_id,
                _message(error),
            )
            metrics.trigger_failure(row.kind, row.node_type)
            locked.failures = (locked.failures or 0) + 1
            locked.registration_status = "failed"
            locked.last_error = f"registering the hook failed: {_message(error)}"
            locked.last_error_at = now
            locked.next_check_at = now + backoff(locked.failures)
            return
        if not keep and registration is not None:
            locked.registration = seal_registration(row.workflow_id, registration)
            locked.registration_status = "registered"
        locked.failures = 0
        locked.last_error = None
        locked.last_error_at = None
        definition = env.definition(row.node_type)
        locked.next_check_at = (
            now + CHECK_INTERVAL if getattr(definition, "check", None) is not None else None
        )


async def _retire_due(env: EventEnv, now: datetime) -> int:
    async with env.sessionmaker() as session:
        rows = list(
            (
                await session.execute(
                    select(TriggerRetirement)
                    .where(
                        TriggerRetirement.next_attempt_at <= now,
                        TriggerRetirement.attempts < MAX_RETIRE_ATTEMPTS,
                    )
                    .order_by(TriggerRetirement.next_attempt_at)
                    .limit(50)
                )
            ).scalars()
        )
    done = 0
    for row in rows:
        site = TriggerSite(row.workflow_id, row.version_number, "", row.node_type)
        error: BaseException | None = None
        try:
            definition = env.definition(row.node_type)
            registration = open_registration(row.workflow_id, row.registration)
            if definition is not None and getattr(definition, "unregister", None) is not None:
                await _call(env, site, "unregister", row.config, registration)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if database_unavailable(exc):
                raise
            error = exc
        async with env.sessionmaker() as session, session.begin():
            locked = await session.get(TriggerRetirement, row.id, with_for_update=True)
            if locked is None:
                continue
            if error is None:
                await session.delete(locked)
                done += 1
                continue
            locked.attempts += 1
            locked.last_error = _message(error)
            locked.next_attempt_at = now + backoff(locked.attempts)
            metrics.trigger_failure("app_webhook", row.node_type)
    return done


async def run_lifecycle_pass(env: EventEnv, clock: Clock) -> None:
    """Register, check and retire what is due at ``clock.now()`` (see the module doc)."""
    now = clock.now()
    for row in await _due(env, now):
        await _register_or_check(env, row, now)
    await _retire_due(env, now)


async def run_lifecycle(
    env: EventEnv, clock: Clock, stop: asyncio.Event, *, tick: float = 1.0
) -> None:
    """Run :func:`run_lifecycle_pass` every ``tick`` seconds until ``stop`` is set."""
    while not stop.is_set():
        try:
            await run_lifecycle_pass(env, clock)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("trigger lifecycle pass failed")
        try:
            await asyncio.wait_for(stop.wait(), tick)
        except TimeoutError:
            pass
