"""Imported OpenAPI connectors in a process's catalog.

Each process (API, worker, scheduler) holds its catalog in memory; the stored versions
(:mod:`backend.services.connectors.openapi_connectors`) are put in it by :func:`refresher`'s
function: when the process starts, after an import in this process, when a worker
is asked for a node-type version its catalog does not have (another process imported
it), and, in an API process, before a request whose process has not yet seen the latest
import (:class:`CatalogWatch`). A refresh reads the versions only when their count or
newest time changed.

**Imports seen by every API process.** An import, once committed, bumps a counter in
Redis (:data:`VERSION_KEY`, :func:`announce`). Before each request (but health checks,
metrics, static files and webhook deliveries) an API process reads the counter, one
Redis ``GET``, and refreshes its catalog when the counter differs from the one it last
refreshed at; so the request after an import in another process already sees it. Redis
only says *when* to look: PostgreSQL holds the versions, so a lost counter (Redis
flushed or restarted) is set again to a random value, which differs from every process's
last one, and each process checks the stored versions once more. When Redis cannot be
reached the request goes on with the catalog as it is (logged).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.services.connectors import openapi_connectors as store
from backend.services.connectors.catalog import AppCatalog, ConnectorRefused
from connectors.openapi.definition import ConnectorDefinition
from connectors.openapi.runtime import connector_of

log = logging.getLogger(__name__)

SOURCE = "OpenAPI import"
VERSION_KEY = "railyard:openapi_connectors:version"
"""Redis counter bumped after every stored import (see the module docstring)."""


def remove(catalog: AppCatalog, name: str) -> None:
    """Take connector ``name`` (and its node, credential types and icons) out of ``catalog``."""
    info = catalog.connector(name)
    if info is None:
        return
    for node_type in info.node_types:
        catalog.specs.pop(node_type, None)
        catalog.triggers.pop(node_type, None)
    for key in [k for k in catalog.actions if k[0].split(".", 1)[0] == name]:
        del catalog.actions[key]
    for ctype in info.credential_types:
        catalog.credential_types.pop(ctype, None)
        catalog.credential_owners.pop(ctype, None)
    for icon in [k for k in catalog.icons if k[0] == name]:
        del catalog.icons[icon]
    catalog.connectors.remove(info)


def install(
    catalog: AppCatalog, versions: Sequence[tuple[ConnectorDefinition, dict[str, int]]]
) -> str | None:
    """Put (or put again) an imported connector built from ``versions`` in ``catalog``.

    Returns ``None``, or why the catalog refused it (also logged and listed in
    ``catalog.errors``, as a plugin that fails to load is)."""
    connector = connector_of(versions, source_version=str(len(versions)))
    existing = catalog.connector(connector.name)
    if existing is not None and existing.source.startswith(SOURCE):
        remove(catalog, connector.name)
    try:
        catalog.add_connector(connector, source=f"{SOURCE} v{len(versions)}")
    except ConnectorRefused as err:
        message = str(err)
        log.error(message)
        catalog.errors.append(message)
        return message
    return None


def refresher(
    sessionmaker: async_sessionmaker[AsyncSession], catalog: AppCatalog
) -> Callable[[], Awaitable[None]]:
    """An ``async`` function putting the stored connectors in ``catalog`` when they changed."""
    seen: list[Any] = [None]

    async def refresh() -> None:
        async with sessionmaker() as session:
            marker = await store.stored_marker(session)
            if marker == seen[0]:
                return
            stored = await store.stored_versions(session)
        for versions in stored.values():
            install(catalog, versions)
        seen[0] = marker

    return refresh


async def _counter(redis: Redis) -> bytes | None:
    """The counter, set to a random value first when Redis lost it."""
    value: bytes | None = await redis.get(VERSION_KEY)
    if value is None:
        await redis.set(VERSION_KEY, secrets.randbits(62), nx=True)
        value = await redis.get(VERSION_KEY)
    return value


async def announce(redis: Redis) -> None:
    """Tell every process that a new version is stored (after its commit)."""
    await redis.set(VERSION_KEY, secrets.randbits(62), nx=True)
    await redis.incr(VERSION_KEY)


class CatalogWatch:
    """Keeps one API process's catalog current with imports made by other processes."""

    def __init__(self, redis: Redis, catalog: AppCatalog) -> None:
        self.redis = redis
        self.catalog = catalog
        self.seen: bytes | None = None
        self._lock = asyncio.Lock()

    async def announce(self) -> None:
        """:func:`announce` on this process's Redis (the importing process calls it);
        never raises: the import is committed, and an unreachable Redis is logged."""
        try:
            await announce(self.redis)
        except Exception:  # the import stands; other processes see it at their next change
            log.warning("the import could not be announced to the other processes", exc_info=True)

    async def check(self) -> None:
        """Refresh the catalog when the counter moved since the last refresh; never
        raises (an unreachable Redis or database is logged, the catalog stays)."""
        try:
            value = await _counter(self.redis)
            if value == self.seen:
                return
            async with self._lock:
                if value != self.seen:
                    await self.catalog.refresh()
                    self.seen = value
        except Exception:  # a request must not fail because the catalog could not refresh
            log.warning("imported connectors not refreshed", exc_info=True)
