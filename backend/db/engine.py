"""Database engine and session factory."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import asyncpg
import msgspec
from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

# Seconds after which a pooled connection is replaced (server-side idle timeouts, failovers).
POOL_RECYCLE_SECONDS = 1800

MAX_OVERFLOW = 20
"""Connections a pool opens beyond ``pool_size`` under load (closed again when returned
while the pool is full); docs/operations.md, "Sizing", counts them in every process's
share of PostgreSQL's ``max_connections``."""


def make_engine(
    database_url: str, *, pool_size: int = 10, pool_timeout: float = 30.0
) -> AsyncEngine:
    """Create the async engine (asyncpg). ``database_url`` is ``postgresql+asyncpg://...``;
    a checkout waits ``pool_timeout`` seconds for a connection when all ``pool_size`` +
    :data:`MAX_OVERFLOW` are in use, then raises SQLAlchemy's ``TimeoutError``.

    No ``pool_pre_ping``: it costs three round trips per checkout (begin, ``;``, rollback
    on asyncpg), i.e. per transaction on the hot path. Instead a checkout hook asks the
    asyncpg connection whether its socket was closed (a PostgreSQL restart or an admin
    shutdown closes it; no round trip), the pool replaces such connections, and connections
    are recycled every :data:`POOL_RECYCLE_SECONDS`. A connection that dies silently fails
    its statement; SQLAlchemy then invalidates the pool, and the sweeper redoes the work.
    asyncpg prepares every statement once per connection (SQLAlchemy's prepared statement
    cache, 100 statements by default). The pool hands out the connection returned last
    (``pool_use_lifo``): PostgreSQL plans a prepared statement anew for each of its first
    five executions on a connection before it settles on a generic plan (the
    ``plan_cache_mode`` rule of PostgreSQL's PREPARE documentation), and the engine's
    one-statement writes are large; handed out first in first out, every connection of the
    pool was cold in turn, and an API process's first ~45 waiting webhooks answered in
    15-27 ms instead of ~5 (measured with the peers harness' Railyard setup); last in first
    out, the few connections a light load needs warm up within a dozen requests, and the
    idle ones are left to be recycled. JSON and JSONB values are encoded and decoded with
    msgspec (several times faster than the standard library's json on step inputs and
    outputs, which every engine transaction reads and writes). Connections are opened by
    :func:`_deferred_connect`, so the fast path's synchronous checkout
    (backend/db/fast_path.py) can give up a connection attempt cleanly.
    """
    engine = create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=MAX_OVERFLOW,
        pool_timeout=pool_timeout,
        pool_pre_ping=False,
        pool_use_lifo=True,
        pool_recycle=POOL_RECYCLE_SECONDS,
        json_serializer=_json_encode,
        json_deserializer=msgspec.json.decode,
        connect_args={"async_creator_fn": _deferred_connect},
    )
    event.listen(engine.sync_engine, "checkout", _reject_closed)
    return engine


def _json_encode(value: Any) -> str:
    """JSON text of ``value`` for a JSON/JSONB column (msgspec; same output as ``json``
    for JSON-able builtins, and ISO 8601 strings for dates and times)."""
    return msgspec.json.encode(value).decode()


def _deferred_connect(*args: Any, **kwargs: Any) -> _DeferredConnect:
    """``asyncpg.connect(*args, **kwargs)`` (the arguments SQLAlchemy derives from the
    URL), started only when awaited. SQLAlchemy's asyncpg dialect calls this and awaits
    the result in a greenlet; when the pool asks for a connection where it cannot wait
    (outside a greenlet: it raises ``MissingGreenlet`` and closes its own coroutine
    unstarted), nothing was started, so no "coroutine was never awaited" warning."""
    return _DeferredConnect(args, kwargs)


class _DeferredConnect:
    """An awaitable that runs ``asyncpg.connect`` with its arguments when awaited."""

    __slots__ = ("args", "kwargs")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.args = args
        self.kwargs = kwargs

    def __await__(self) -> Generator[Any, None, asyncpg.Connection]:
        return asyncpg.connect(*self.args, **self.kwargs).__await__()


def _reject_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Pool checkout hook: a connection whose socket is closed is replaced, not used."""
    raw = getattr(dbapi_connection, "_connection", None)
    if raw is not None and raw.is_closed():
        raise exc.DisconnectionError("connection closed by the server")


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Session factory; sessions don't expire objects on commit."""
    return async_sessionmaker(engine, expire_on_commit=False)
