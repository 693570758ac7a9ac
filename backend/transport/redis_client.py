"""The Redis client every process uses for arq jobs, wake-ups and notices."""

from __future__ import annotations

from arq.connections import ArqRedis
from redis.asyncio import ConnectionPool

CONNECT_TIMEOUT_SECONDS = 2.0
"""Longest wait, in seconds, for a TCP connection to Redis."""

SOCKET_TIMEOUT_SECONDS = 10.0
"""Longest wait, in seconds, for a reply to a command (a Redis that stopped answering
without closing the connection, e.g. a network partition, then fails the command instead
of hanging the caller). Pub/sub reads pass their own, shorter timeouts."""


def redis_client(url: str) -> ArqRedis:
    """An :class:`~arq.connections.ArqRedis` for ``url`` (``redis://host:port/db``,
    ``rediss://`` or ``unix://``), made without connecting.

    Unlike arq's ``create_pool`` (which PINGs, retries five times and then raises), a
    process starts while Redis is down; each command connects on demand, so the first
    command after Redis comes back succeeds. Connection errors surface per command as
    ``redis.exceptions.ConnectionError`` / ``TimeoutError``.
    """
    pool = ConnectionPool.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
    )
    client = ArqRedis(pool)
    client.auto_close_connection_pool = True  # aclose() closes the pool's connections too
    return client
