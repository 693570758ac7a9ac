"""The composition root: settings -> database, Redis, catalog, execution service.

Every process kind (api, worker, scheduler, dev) builds one :class:`Runtime`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis, RedisSettings, create_pool
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from backend.db.engine import make_engine, make_sessionmaker
from backend.services.catalog import AppCatalog, load_catalog
from backend.services.execution import Execution
from backend.settings import Settings
from backend.workers.dispatch import ArqDispatcher
from connectors import sdk

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

    async def close(self) -> None:
        """Dispose the connection pool and close Redis."""
        await self.redis.aclose()
        await self.engine.dispose()


def ssrf_policy(settings: Settings) -> Any:
    """The outbound-HTTP SSRF policy from settings."""
    return sdk.SsrfPolicy(
        allow_private=settings.http_allow_private, allowlist=tuple(settings.http_allowlist)
    )


def make_context_factory(settings: Settings) -> Any:
    """Build ``factory(info, heartbeat, is_cancelled) -> sdk.ActionContext``."""
    policy = ssrf_policy(settings)

    def factory(info: dict[str, Any], heartbeat: Any, is_cancelled: Any) -> Any:
        return sdk.ActionContext(
            info=sdk.ActionInfo(**info),
            heartbeat=heartbeat,
            cancelled=is_cancelled,
            http_client=lambda: sdk.make_http_client(policy),
            logger=logging.getLogger(f"railyard.connector.{info['node_type']}"),
        )

    return factory


async def build_runtime(settings: Settings, *, pool_size: int = 10) -> Runtime:
    """Connect to PostgreSQL and Redis and wire the services."""
    settings.require_services()
    engine = make_engine(settings.database_url, pool_size=pool_size)
    sessionmaker = make_sessionmaker(engine)
    redis = await create_pool(RedisSettings.from_dsn(settings.redis_url))
    catalog = load_catalog()
    execution = Execution(
        sessionmaker,
        ArqDispatcher(redis),
        catalog,
        make_context_factory(settings),
        lease_seconds=settings.lease_seconds,
        base_url=settings.base_url,
    )
    return Runtime(settings, engine, sessionmaker, redis, catalog, execution)
