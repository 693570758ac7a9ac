"""The Redis client every process uses for arq jobs, wake-ups and notices.

Redis is reached either at the host of ``REDIS_URL`` or, with ``RAILYARD_REDIS_SENTINELS``
set, through Redis Sentinel: the Sentinels are asked for the current primary of
``RAILYARD_REDIS_SENTINEL_MASTER`` on every new connection, so a failover needs no
restart (docs/operations.md, "Redis Sentinel"). :class:`RedisTarget` holds either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis, RedisSettings
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import SSLConnection, parse_url
from redis.asyncio.sentinel import Sentinel

from backend.settings import Settings

CONNECT_TIMEOUT_SECONDS = 2.0
"""Longest wait, in seconds, for a TCP connection to Redis."""

SOCKET_TIMEOUT_SECONDS = 10.0
"""Longest wait, in seconds, for a reply to a command (a Redis that stopped answering
without closing the connection, e.g. a network partition, then fails the command instead
of hanging the caller). Pub/sub reads pass their own, shorter timeouts."""


@dataclass(frozen=True)
class RedisTarget:
    """Where Redis is. ``url``: ``redis://[user:pass@]host:port/db`` (``rediss://``,
    ``unix://``); with ``sentinels`` (``(host, port)`` pairs) only its user, password,
    database and scheme count, and the primary named ``master`` is asked of the Sentinels
    (authenticating with ``sentinel_password`` when set)."""

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = "mymaster"
    sentinel_password: str = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisTarget:
        """The target of ``REDIS_URL`` and the ``RAILYARD_REDIS_SENTINEL*`` settings
        (addresses already checked by :func:`backend.settings.load_settings`)."""
        return cls(
            url=settings.redis_url,
            sentinels=tuple(split_address(a) for a in settings.redis_sentinels),
            master=settings.redis_sentinel_master,
            sentinel_password=settings.redis_sentinel_password,
        )


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:26379"`` for IPv6) -> ``("host", port)``.

    Raises :class:`ValueError` when the port is missing or not a number."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{address!r} is not host:port")
    return host.strip("[]"), int(port)


def _sentinel_client(target: RedisTarget) -> ArqRedis:
    kwargs: dict[str, Any] = dict(parse_url(target.url))
    kwargs.pop("host", None)
    kwargs.pop("port", None)
    if kwargs.pop("connection_class", None) is SSLConnection:
        kwargs["ssl"] = True  # the sentinel pool picks its own TLS connection class
    timeouts = {
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "socket_timeout": SOCKET_TIMEOUT_SECONDS,
    }
    sentinel_kwargs: dict[str, Any] = dict(timeouts)
    if target.sentinel_password:
        sentinel_kwargs["password"] = target.sentinel_password
    sentinel = Sentinel(
        list(target.sentinels), sentinel_kwargs=sentinel_kwargs, **timeouts, **kwargs
    )
    return sentinel.master_for(target.master, redis_class=ArqRedis)


def redis_client(target: str | RedisTarget) -> ArqRedis:
    """An :class:`~arq.connections.ArqRedis` for ``target`` (a URL, or a
    :class:`RedisTarget`), made without connecting.

    Unlike arq's ``create_pool`` (which PINGs, retries five times and then raises), a
    process starts while Redis is down; each command connects on demand, so the first
    command after Redis comes back succeeds. Connection errors surface per command as
    ``redis.exceptions.ConnectionError`` / ``TimeoutError`` (through Sentinel also
    ``MasterNotFoundError``, a ``ConnectionError``).
    """
    if isinstance(target, RedisTarget) and target.sentinels:
        client = _sentinel_client(target)
    else:
        url = target.url if isinstance(target, RedisTarget) else target
        pool = ConnectionPool.from_url(
            url,
            socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
        )
        client = ArqRedis(pool)
    client.auto_close_connection_pool = True  # aclose() closes the pool's connections too
    return client


def arq_redis_settings(target: RedisTarget) -> RedisSettings:
    """arq's :class:`~arq.connections.RedisSettings` for ``target``: ``from_dsn(url)``,
    and with Sentinels ``host`` = their addresses, ``sentinel=True``, ``sentinel_master``."""
    settings = RedisSettings.from_dsn(target.url)
    if target.sentinels:
        settings.host = list(target.sentinels)
        settings.sentinel = True
        settings.sentinel_master = target.master
    return settings
