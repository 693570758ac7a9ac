"""``railyard search-indexer`` and ``railyard search-reindex`` (docs/search.md,
"Elasticsearch"): the processes that keep an Elasticsearch index in step with PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from backend.db.engine import make_engine, make_sessionmaker
from backend.search.elastic import ElasticSearch
from backend.search.es_indexer import OutboxIndexer
from backend.settings import Settings, SettingsError

log = logging.getLogger(__name__)


async def _with_backend(settings: Settings, work: Callable[[ElasticSearch], Awaitable[Any]]) -> Any:
    if settings.search_backend != "elasticsearch" or not settings.elasticsearch_url:
        raise SettingsError(
            "the search indexer needs RAILYARD_SEARCH_BACKEND=elasticsearch and"
            " RAILYARD_ELASTICSEARCH_URL (PostgreSQL search needs no indexer)"
        )
    engine = make_engine(settings.database_url, pool_size=2)
    backend = ElasticSearch.from_settings(settings, make_sessionmaker(engine))
    try:
        return await work(backend)
    finally:
        await backend.close()
        await engine.dispose()


async def run_indexer(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Install the index templates (retrying while Elasticsearch is down), then index the
    outbox until ``stop`` (SIGINT/SIGTERM when None)."""
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

    async def work(backend: ElasticSearch) -> None:
        delay = 0.5
        while not stop.is_set():
            try:
                await backend.ensure_indexes()
                break
            except Exception as exc:
                log.warning("cannot install the search indexes yet (%r); retrying", exc)
                try:
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                except TimeoutError:
                    delay = min(delay * 2, 30.0)
        indexer = OutboxIndexer(backend.sessionmaker, backend, prefix=backend.prefix)
        log.info("search indexer following the outbox into %s-*", backend.prefix)
        await indexer.run(stop)

    await _with_backend(settings, work)


async def reindex(settings: Settings) -> dict[str, int]:
    """Rebuild every Elasticsearch document from PostgreSQL; returns counts per kind."""

    async def work(backend: ElasticSearch) -> dict[str, int]:
        counts: dict[str, int] = await backend.reindex()
        return counts

    result: dict[str, int] = await _with_backend(settings, work)
    return result
