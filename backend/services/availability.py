"""Is PostgreSQL or Redis reachable? Classifying errors and probing the servers.

Every process asks the same questions during an outage: the API to answer 503 instead of
500, workers to log one line instead of a traceback per job, health probes to say which
server is down. The answers live here, once.

An error "means the database is unavailable" when it, or any exception it was raised from
(``__cause__``, ``__context__`` and SQLAlchemy's ``orig``, followed to any depth), is one of
:data:`DATABASE_DOWN_ERRORS`, a SQLAlchemy error that invalidated its connection, or a
pool timeout. asyncpg errors usually sit one or two links down that chain: SQLAlchemy's
``DBAPIError.orig`` is its adapter's exception, whose ``__cause__`` is asyncpg's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import asyncpg
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.fast_path import stale_connection

DATABASE_DOWN_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.PostgresConnectionError,  # 08xxx: cannot connect, connection lost
    asyncpg.exceptions.OperatorInterventionError,  # 57Pxx: shutting down, starting up
    asyncpg.exceptions.TooManyConnectionsError,  # 53300: the server's slots are full
    asyncpg.exceptions.InterfaceError,  # "connection is closed"
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,  # no pooled connection within the pool timeout
    ConnectionError,  # refused, reset, aborted, broken pipe (OSError family)
    TimeoutError,  # connect timeout
)
"""Exception types meaning "PostgreSQL cannot be reached right now"."""

REDIS_DOWN_ERRORS: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError)
"""Exception types meaning "Redis cannot be reached right now"."""

PROBE_TIMEOUT_SECONDS = 2.0
"""How long a readiness probe waits for each server, in seconds."""


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from or during, each once.

    Follows ``__cause__``, ``__context__`` and SQLAlchemy's ``orig`` (the driver's error).
    """
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for link in (
            current.__cause__,
            current.__context__,
            getattr(current, "orig", None),
        ):
            if isinstance(link, BaseException):
                pending.append(link)


def database_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` means PostgreSQL is unreachable (see the module docstring), also
    a statement refused on a connection the server just ended
    (:func:`backend.db.fast_path.stale_connection`); a Redis connection error (whose chain
    also holds an ``OSError``) is not."""
    if redis_unavailable(exc):
        return False
    for error in causes(exc):
        if isinstance(error, DATABASE_DOWN_ERRORS) or stale_connection(error):
            return True
        if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
            return True
    return False


def redis_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` (or an error it came from) is a Redis connection or timeout error."""
    return any(isinstance(error, REDIS_DOWN_ERRORS) for error in causes(exc))


def unavailable_service(exc: BaseException) -> str | None:
    """``"database"``, ``"redis"`` or None: which server's outage ``exc`` reports."""
    if redis_unavailable(exc):
        return "redis"
    if database_unavailable(exc):
        return "database"
    return None


async def probe_database(engine: AsyncEngine, timeout: float = PROBE_TIMEOUT_SECONDS) -> str:
    """``"ok"`` when ``select 1`` answers within ``timeout`` seconds, else ``"down: <error>"``."""
    try:
        async with asyncio.timeout(timeout):
            async with engine.connect() as conn:
                await conn.execute(text("select 1"))
    except Exception as exc:
        return f"down: {type(exc).__name__}"
    return "ok"


async def probe_redis(redis: Any, timeout: float = PROBE_TIMEOUT_SECONDS) -> str:
    """``"ok"`` when ``PING`` answers within ``timeout`` seconds, else ``"down: <error>"``."""
    try:
        async with asyncio.timeout(timeout):
            await redis.ping()
    except Exception as exc:
        return f"down: {type(exc).__name__}"
    return "ok"
