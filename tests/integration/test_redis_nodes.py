"""Redis get/set/publish nodes against the session's real Redis (database 5, an ACL user
of their own, so Railyard's data in database 0 is untouched)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from redis.asyncio import Redis

from backend.embedded import EmbeddedRedis
from connectors import sdk
from connectors.builtin.databases import redis_kv
from connectors.testing import ActionTestEnvironment
from tests.fakes.smtp import free_port
from tests.unit.connectors.output_schema import assert_declared_output

USER, PASSWORD = "nodes", "redis nodes password"


@pytest.fixture
async def admin(redis_server: EmbeddedRedis) -> Any:
    client = Redis.from_url(redis_server.url, decode_responses=True)
    await client.execute_command("ACL", "SETUSER", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all")
    yield client
    await client.aclose()


def _env(redis_server: EmbeddedRedis, **login: Any) -> ActionTestEnvironment:
    fields = {
        "host": "127.0.0.1",
        "port": redis_server.port,
        "database": 5,
        "username": USER,
        "password": PASSWORD,
        **login,
    }
    return ActionTestEnvironment(
        credentials={"r": {"type": "redis", **fields}}, credential_types=[redis_kv.REDIS]
    )


async def _run(env: ActionTestEnvironment, action: sdk.ActionDefinition, **config: Any) -> Any:
    out = await env.run(action, {"credential": "r", **config}, None)
    assert_declared_output(action, out)
    return out


async def test_set_then_get_text_and_json(redis_server: EmbeddedRedis, admin: Redis) -> None:
    env = _env(redis_server)
    key = f"k-{uuid.uuid4().hex}"
    assert await _run(env, redis_kv.set_value, key=key, value={"n": 1}, ttl=60) == {
        "key": key,
        "written": True,
    }
    assert await _run(env, redis_kv.get, key=key) == {
        "key": key,
        "found": True,
        "value": '{"n": 1}',
    }
    assert (await _run(env, redis_kv.get, key=key, decode="json"))["value"] == {"n": 1}
    raw = Redis.from_url(redis_server.url.rsplit("/", 1)[0] + "/5", decode_responses=True)
    try:
        assert 0 < await raw.ttl(key) <= 60
    finally:
        await raw.aclose()
    missing = await _run(env, redis_kv.get, key=key + "-none")
    assert missing == {"key": key + "-none", "found": False, "value": None}
    kept = await _run(env, redis_kv.set_value, key=key, value="x", condition="if_missing")
    assert kept["written"] is False
    assert (await _run(env, redis_kv.get, key=key))["value"] == '{"n": 1}'
    assert (
        await _run(env, redis_kv.set_value, key=key + "-new", value="x", condition="if_exists")
    )["written"] is False
    assert (await _run(env, redis_kv.set_value, key=key, value="plain"))["written"] is True
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, redis_kv.get, key=key, decode="json")
    assert err.value.kind == "redis_not_json"


async def test_publish_reaches_subscribers(redis_server: EmbeddedRedis, admin: Redis) -> None:
    channel = f"c-{uuid.uuid4().hex}"
    pubsub = admin.pubsub()
    await pubsub.subscribe(channel)
    try:
        await pubsub.get_message(timeout=1)  # the subscribe confirmation
        out = await _run(_env(redis_server), redis_kv.publish, channel=channel, message={"hi": 1})
        assert out == {"channel": channel, "receivers": 1}
        message = None
        for _ in range(50):
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
            if message:
                break
            await asyncio.sleep(0)
        assert message is not None and message["data"] == '{"hi": 1}'
    finally:
        await pubsub.aclose()


async def test_wrong_login_wrong_type_and_unreachable(
    redis_server: EmbeddedRedis, admin: Redis
) -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_env(redis_server, password="wrong"), redis_kv.get, key="k")
    assert err.value.kind == "redis_auth"
    env = _env(redis_server)
    key = f"list-{uuid.uuid4().hex}"
    raw = Redis.from_url(redis_server.url.rsplit("/", 1)[0] + "/5")
    try:
        await raw.rpush(key, "a")
    finally:
        await raw.aclose()
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, redis_kv.get, key=key)
    assert err.value.kind == "redis_error" and "WRONGTYPE" in err.value.message
    with pytest.raises(sdk.ActionError) as err:
        await _run(_env(redis_server, port=free_port()), redis_kv.get, key="k")
    assert err.value.kind == "redis_connect" and err.value.retryable
    guarded = _env(redis_server)
    guarded.ssrf = sdk.SsrfPolicy()
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(guarded, redis_kv.get, key="k")
    assert err.value.kind == "ssrf_blocked"
