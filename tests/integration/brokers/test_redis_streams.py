"""Redis Streams trigger: entry ids, payload modes, where a new group starts, and entries
taken over from a consumer that died (XAUTOCLAIM), against a real Redis."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from connectors.builtin.brokers.redis_streams import message_received
from connectors.testing import TriggerTestEnvironment
from tests.integration.brokers.cases import LISTEN_TIMEOUT, RedisCase, fresh_name

pytestmark = [pytest.mark.brokers, pytest.mark.xdist_group("redis")]


async def _xadd(case: RedisCase, stream: str, fields: dict[str, str]) -> str:
    client = Redis.from_url(case.server.url, decode_responses=True)
    try:
        return str(await client.xadd(stream, fields))  # type: ignore[arg-type]
    finally:
        await client.aclose()


async def test_fields_mode_and_a_dead_consumers_entries_taken_over(redis_case: RedisCase) -> None:
    stream = fresh_name("orders")
    entry = await _xadd(redis_case, stream, {"order": "A-1", "total": "3"})
    config = {"url": redis_case.server.url, "stream": stream, "start": "all", "consumer": "a"}
    env = TriggerTestEnvironment()

    got = await env.listen(message_received, config, timeout=LISTEN_TIMEOUT)
    [event] = got.events
    assert event.id == f"{stream}:{entry}"
    assert event.data == {
        "payload": {"order": "A-1", "total": "3"},
        "fields": {"order": "A-1", "total": "3"},
        "stream": stream,
        "entry_id": entry,
        "message_id": f"{stream}:{entry}",
    }

    # consumer "a" died with the entry pending; "b" takes it over once it is idle
    await asyncio.sleep(0.3)
    other = {**config, "consumer": "b", "claim_idle": 0.2}
    taken = await env.listen(message_received, other, timeout=LISTEN_TIMEOUT)
    assert [e.id for e in taken.events] == [event.id]


async def test_missing_payload_field_is_a_dead_letter(redis_case: RedisCase) -> None:
    stream = fresh_name("bad")
    await _xadd(redis_case, stream, {"other": "x"})
    good = await _xadd(redis_case, stream, {"payload": '"fine"', "source": "s"})
    config = {"url": redis_case.server.url, "stream": stream, "start": "all", "payload": "json"}

    got = await TriggerTestEnvironment().listen(message_received, config, timeout=LISTEN_TIMEOUT)
    assert [(e.id, e.data["payload"], e.data["fields"]) for e in got.events] == [
        (f"{stream}:{good}", "fine", {"source": "s"})
    ]
    [dead] = got.dead_letters
    assert dead.reason == "the entry has no field 'payload'"
    assert dead.raw == b'{"other":"x"}'


async def test_a_new_group_starts_at_new_entries(redis_case: RedisCase) -> None:
    stream = fresh_name("new")
    await _xadd(redis_case, stream, {"payload": "1"})
    config = {"url": redis_case.server.url, "stream": stream, "payload": "text"}
    env = TriggerTestEnvironment()
    with pytest.raises(TimeoutError):  # creates the group at "$": the old entry is skipped
        await env.listen(message_received, config, timeout=2)
    await _xadd(redis_case, stream, {"payload": "2"})
    got = await env.listen(message_received, config, timeout=LISTEN_TIMEOUT)
    assert [e.data["payload"] for e in got.events] == ["2"]
