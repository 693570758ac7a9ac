"""The composition root: settings -> database, Redis, catalog, execution service.

Every process kind (api, worker, scheduler, dev) builds one :class:`Runtime`.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import httpx
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from backend import crypto
from backend.db import payloads
from backend.db.engine import make_engine, make_sessionmaker
from backend.db.recovery_queries import PgRecoveryQueries
from backend.db.run_store import PgRunStore
from backend.observability import metrics, tracing
from backend.services.connectors import credential_use, openapi_catalog
from backend.services.connectors.catalog import AppCatalog, load_catalog
from backend.services.identity import references
from backend.services.outbound import ssrf_policy
from backend.services.runs import run_watch
from backend.services.runs.execution import Execution
from backend.services.triggers import webhooks
from backend.services.triggers.events.contexts import EventEnv
from backend.services.workflows import pins
from backend.settings import Settings
from backend.transport.dispatch import ArqDispatcher
from backend.transport.redis_client import RedisTarget, redis_client
from connectors import sdk
from connectors.host.contexts import action_context
from connectors.host.outbound import SsrfGuardTransport, guarded_connection_pool

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Live resources of one process; close with :meth:`close`."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    redis: ArqRedis
    catalog: AppCatalog
    execution: Execution
    http_pool: httpx.AsyncHTTPTransport | None = None

    @functools.cached_property
    def events(self) -> EventEnv:
        """The event service's dependencies (backend/services/triggers/events)."""
        return EventEnv(
            self.sessionmaker,
            self.execution,
            self.catalog.triggers,
            self.settings.base_url,
            pin=pins.pin,
        )

    @functools.cached_property
    def catalog_watch(self) -> openapi_catalog.CatalogWatch:
        """Keeps the catalog current with other processes' imports (an API process
        checks it before each request)."""
        return openapi_catalog.CatalogWatch(self.redis, self.catalog)

    async def load_imported_connectors(self) -> None:
        """Put the stored imported connectors in the catalog; a database that cannot be
        reached yet is logged, and the first step needing one loads them then."""
        try:
            await self.catalog.refresh()
        except Exception:  # the process starts while PostgreSQL is down (see build_runtime)
            log.warning("imported connectors not loaded yet", exc_info=True)

    async def close(self) -> None:
        """Finish eager runs and pending run announcements, close the outbound HTTP
        pool, the shared run-notice subscription and Redis, dispose the database pool.
        Eager runs still running (none once the app's lifespan drained them) get the
        shutdown grace, then are handed back to workers."""
        await self.execution.eager.stop(self.settings.shutdown_grace)
        await self.execution.drain()
        if self.http_pool is not None:
            await self.http_pool.aclose()
        await run_watch.close_notices(self.redis)
        await self.redis.aclose()
        await self.engine.dispose()


def make_context_factory(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession] | None = None,
    catalog: AppCatalog | None = None,
    *,
    http_pool: httpx.AsyncBaseTransport | None = None,
) -> Any:
    """Build ``factory(info: sdk.ActionInfo, heartbeat, is_cancelled, publisher_check=True)
    -> sdk.ActionContext``.

    ``http_pool`` (from :func:`connectors.host.outbound.guarded_connection_pool` for this
    settings' SSRF policy) is shared by every attempt's HTTP client and OAuth2 token
    refresh, so connections are kept alive across steps; the caller closes it. Without it
    each attempt opens its own connections.

    With ``sessionmaker`` and ``catalog`` the context resolves credential fields of the
    node config through :func:`backend.services.connectors.credential_use.resolve_for_action`
    (decrypt,
    refresh OAuth2 tokens through the SSRF-guarded transport, audit the use);
    ``publisher_check=False`` leaves out the check that the version's publisher may use
    them (a draft trigger's code run for the designer, whose caller checked its user).
    """
    policy = ssrf_policy(settings)
    keyring = crypto.keyring_from_settings(settings) if settings.encryption_key else None
    connector_settings = settings.connector_settings()

    # over a shared pool the guard holds no connections of its own: one serves every attempt
    shared_guard = (
        SsrfGuardTransport(policy, inner=http_pool, close_inner=False) if http_pool else None
    )

    def factory(
        info: sdk.ActionInfo, heartbeat: Any, is_cancelled: Any, publisher_check: bool = True
    ) -> Any:
        resolver = None
        if sessionmaker is not None and catalog is not None:
            resolver = functools.partial(
                credential_use.resolve_for_action,
                sessionmaker,
                catalog,
                keyring,
                info=info,
                refresh_margin=settings.oauth2_refresh_margin,
                transport=shared_guard or SsrfGuardTransport(policy),
                publisher_check=publisher_check,
            )
        return action_context(
            info,
            ssrf=policy,  # connectors dialling other protocols (SMTP) check the same policy
            pool=http_pool,
            heartbeat=heartbeat,
            cancelled=is_cancelled,
            logger=logging.getLogger(f"railyard.connector.{info.node_type}"),
            settings=connector_settings,
            credential_resolver=resolver,
        )

    return factory


async def build_runtime(settings: Settings, *, pool_size: int = 10, name: str = "app") -> Runtime:
    """Wire the services to PostgreSQL and Redis; ``name`` labels this runtime's database
    pool in ``railyard_db_pool_*`` metrics (``api``, ``worker``, ``scheduler``).

    Nothing connects here: the database pool and the Redis client connect on first use,
    so a process starts (and reports not-ready) while either server is down.
    """
    settings.require_services()
    engine = make_engine(
        settings.database_url, pool_size=pool_size, pool_timeout=settings.db_pool_timeout
    )
    sessionmaker = make_sessionmaker(engine)
    redis = redis_client(RedisTarget.from_settings(settings))
    catalog = load_catalog()
    catalog.refreshers.append(openapi_catalog.refresher(sessionmaker, catalog))
    webhooks.accept_connector_triggers(catalog.triggers)
    if settings.encryption_key:
        crypto.configure(crypto.keyring_from_settings(settings))
    payloads.configure(settings.payload_inline_limit)
    http_pool = guarded_connection_pool(ssrf_policy(settings))
    metrics.POOLS.watch(name, engine.sync_engine.pool)
    # with tracing on, every connector HTTP call is a span (the pool itself is closed below)
    calls: Any = tracing.TracingTransport(http_pool) if tracing.enabled() else http_pool
    dispatcher = ArqDispatcher(redis)
    execution = Execution(
        PgRunStore(sessionmaker, refusal=references.called_workflow_refusal),
        dispatcher,
        catalog,
        make_context_factory(settings, sessionmaker, catalog, http_pool=calls),
        recovery_queries=PgRecoveryQueries(sessionmaker),
        # a waiting webhook of this process hears of the runs it executes without Redis
        events=run_watch.LocalNotices(dispatcher, redis),
        lease_seconds=settings.lease_seconds,
        base_url=settings.base_url,
        eager_runs=settings.eager_runs,
    )
    # a webhook waiting for a run executed here listens on Redis once the run leaves
    execution.eager.on_end = run_watch.notices_for(redis).run_left
    return Runtime(settings, engine, sessionmaker, redis, catalog, execution, http_pool)
