"""Imported OpenAPI connectors in a process's catalog.

Each process (API, worker, scheduler) holds its catalog in memory; the stored versions
(:mod:`backend.services.openapi_connectors`) are put in it by :func:`refresher`'s
function: when the process starts, after an import in this process, and when a worker
is asked for a node-type version its catalog does not have (another process imported
it). A refresh reads the versions only when their count or newest time changed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.services import openapi_connectors as store
from backend.services.catalog import AppCatalog, ConnectorRefused
from connectors.openapi.definition import ConnectorDefinition
from connectors.openapi.runtime import connector_of

log = logging.getLogger(__name__)

SOURCE = "OpenAPI import"


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
