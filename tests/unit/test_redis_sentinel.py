"""Redis Sentinel settings reach the Redis client and arq's settings."""

from __future__ import annotations

import pytest
from redis.asyncio.sentinel import SentinelConnectionPool, SentinelManagedSSLConnection

from backend.settings import SettingsError, load_settings
from backend.transport.redis_client import (
    RedisTarget,
    arq_redis_settings,
    redis_client,
    split_address,
)
from backend.workers.worker import make_worker

SENTINEL_ENV = {
    "DATABASE_URL": "postgresql://db/railyard",
    "REDIS_URL": "rediss://:primary-pw@ignored:6379/3",
    "RAILYARD_REDIS_SENTINELS": "sentinel-1:26379, sentinel-2:26379,[::1]:26380",
    "RAILYARD_REDIS_SENTINEL_MASTER": "railyard",
    "RAILYARD_REDIS_SENTINEL_PASSWORD": "sentinel-pw",
}


async def test_sentinel_settings_make_a_sentinel_managed_client() -> None:
    target = RedisTarget.from_settings(load_settings(environ=SENTINEL_ENV))
    assert target.sentinels == (("sentinel-1", 26379), ("sentinel-2", 26379), ("::1", 26380))
    client = redis_client(target)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "railyard" and pool.is_master
    # the primary's password, database and TLS come from REDIS_URL, not its host
    assert pool.connection_kwargs["password"] == "primary-pw"
    assert pool.connection_kwargs["db"] == 3
    assert "host" not in pool.connection_kwargs
    assert pool.connection_class is SentinelManagedSSLConnection
    sentinels = pool.sentinel_manager.sentinels
    assert [s.connection_pool.connection_kwargs["host"] for s in sentinels] == [
        "sentinel-1",
        "sentinel-2",
        "::1",
    ]
    assert {s.connection_pool.connection_kwargs["password"] for s in sentinels} == {"sentinel-pw"}
    await client.aclose()


def test_arq_and_the_worker_get_the_sentinels() -> None:
    settings = load_settings(environ=SENTINEL_ENV)
    arq = arq_redis_settings(RedisTarget.from_settings(settings))
    assert arq.sentinel is True and arq.sentinel_master == "railyard"
    assert arq.host == [("sentinel-1", 26379), ("sentinel-2", 26379), ("::1", 26380)]
    assert arq.password == "primary-pw" and arq.database == 3 and arq.ssl
    worker = make_worker(settings)
    assert worker.redis_settings == arq
    assert worker.redis_target == RedisTarget.from_settings(settings)


def test_without_sentinels_the_url_is_used_as_before() -> None:
    settings = load_settings(environ={"REDIS_URL": "redis://cache:6380/2"})
    target = RedisTarget.from_settings(settings)
    assert target.sentinels == ()
    pool = redis_client(target).connection_pool
    assert not isinstance(pool, SentinelConnectionPool)
    assert (pool.connection_kwargs["host"], pool.connection_kwargs["port"]) == ("cache", 6380)
    arq = arq_redis_settings(target)
    assert (arq.host, arq.port, arq.database, arq.sentinel) == ("cache", 6380, 2, False)


def test_a_malformed_sentinel_address_is_refused_with_the_variable_named() -> None:
    with pytest.raises(SettingsError, match="RAILYARD_REDIS_SENTINELS: 'sentinel-1' is not"):
        load_settings(environ={"RAILYARD_REDIS_SENTINELS": "sentinel-1"})
    with pytest.raises(ValueError, match="is not host:port"):
        split_address("host:port")
