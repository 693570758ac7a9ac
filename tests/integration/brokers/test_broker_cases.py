"""The exactly-once rule of every broker trigger, against the real brokers.

Each scenario runs once per broker (Redis Streams, RabbitMQ, Mosquitto, NATS JetStream):

- messages become events with their payload and id; an invalid payload goes to the dead
  letters; an event whose ``emit`` did not return (the test subscription ends inside it,
  as when the process dies before the ack) is delivered again to the next subscription
  with the same id, while the acked messages and the dead letter are not;
- with ``concurrency`` above 1 (not MQTT, whose acks must keep the broker's order)
  several messages are stored at once, each acked after its own ``emit``;
- a broker that goes away ends the subscription with a ``broker_disconnected`` error
  (the product reconnects), and a message whose ack could not reach the broker is
  delivered again, with the same id, once the broker is back.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from connectors import sdk
from connectors.builtin.brokers.common import DISCONNECTED
from connectors.testing import ListenDone, TriggerTestEnvironment
from tests.integration.brokers.cases import (
    LISTEN_TIMEOUT,
    BrokerCase,
    GatedEmit,
    SlowEmit,
    fresh_name,
    start_listen,
)
from tests.unit.connectors.output_schema import assert_declared_output

pytestmark = pytest.mark.brokers

CASES = [
    pytest.param(name, marks=pytest.mark.xdist_group(name), id=name)
    for name in ("redis", "amqp", "mqtt", "nats")
]


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> BrokerCase:
    return request.getfixturevalue(f"{request.param}_case")  # type: ignore[no-any-return]


async def test_events_dead_letters_and_redelivery_of_the_unacked(case: BrokerCase) -> None:
    name = fresh_name("rcv")
    config = case.config(name)
    await case.prepare(name)
    for body in (b'{"n": 1}', b"{not json", b'{"n": 3}'):
        await case.publish(name, body)
    env = TriggerTestEnvironment()

    first = await env.listen(case.trigger, config, count=2, timeout=LISTEN_TIMEOUT)
    assert [e.data["payload"] for e in first.events] == [{"n": 1}, {"n": 3}]
    for event in first.events:
        assert_declared_output(case.trigger, event.data)
        assert event.meta["message_id"] == event.id == event.data["message_id"]
    assert len({e.id for e in first.events}) == 2
    [dead] = first.dead_letters
    assert dead.reason.startswith("not JSON") and dead.raw == b"{not json"
    assert dead.meta["message_id"]

    # {"n": 3} was emitted but not acked; {"n": 1} and the dead letter were acked
    await case.publish(name, b'{"n": 4}')
    second = await env.listen(case.trigger, config, count=2, timeout=LISTEN_TIMEOUT)
    by_n = {e.data["payload"]["n"]: e.id for e in second.events}
    assert set(by_n) == {3, 4}
    assert by_n[3] == first.events[1].id
    assert by_n[4] not in {e.id for e in first.events}
    assert second.dead_letters == []


async def test_broker_restart_ends_the_subscription_and_keeps_the_unacked(
    case: BrokerCase,
) -> None:
    name = fresh_name("rst")
    config = case.config(name)
    await case.prepare(name)
    await case.publish(name, b'{"n": 1}')
    env = TriggerTestEnvironment()
    emit = GatedEmit()
    running = start_listen(env, case.trigger, config, emit)
    try:
        await asyncio.wait_for(emit.arrived.wait(), LISTEN_TIMEOUT)
        await asyncio.to_thread(case.server.stop)
        with pytest.raises(sdk.ActionError) as refused:  # the broker is down
            await env.listen(case.trigger, config, timeout=LISTEN_TIMEOUT)
        assert refused.value.kind == DISCONNECTED
        emit.release.set()  # the run is stored; the ack cannot reach the broker
        with pytest.raises(sdk.ActionError) as ended:
            await asyncio.wait_for(running, LISTEN_TIMEOUT)
        assert ended.value.kind == DISCONNECTED
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await asyncio.to_thread(case.server.start)

    again = await env.listen(case.trigger, config, timeout=LISTEN_TIMEOUT)
    [event] = again.events
    assert event.data["payload"] == {"n": 1}
    assert event.id == emit.events[0].id


@pytest.fixture(params=[p for p in CASES if p.values[0] != "mqtt"])
def parallel_case(request: pytest.FixtureRequest) -> BrokerCase:
    return request.getfixturevalue(f"{request.param}_case")  # type: ignore[no-any-return]


async def test_messages_stored_in_parallel_are_each_acked(parallel_case: BrokerCase) -> None:
    case = parallel_case
    name = fresh_name("par")
    config = {**case.config(name), "concurrency": 4}
    await case.prepare(name)
    for n in range(8):
        await case.publish(name, msgspec.json.encode({"n": n}))
    env = TriggerTestEnvironment()
    emit = SlowEmit(count=9, delay=0.2)
    running = start_listen(env, case.trigger, config, emit)
    try:
        await asyncio.wait_for(emit.stored.wait(), LISTEN_TIMEOUT)
        assert sorted(e.data["payload"]["n"] for e in emit.events) == list(range(8))
        assert emit.most_at_once == 4
        await asyncio.sleep(0.3)  # the last acks follow their emits by a round trip
        await case.publish(name, b'{"n": 8}')  # the ninth ends the subscription unacked
        with pytest.raises(ListenDone):
            await asyncio.wait_for(running, LISTEN_TIMEOUT)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    again = await env.listen(case.trigger, case.config(name), timeout=LISTEN_TIMEOUT)
    assert [e.data["payload"] for e in again.events] == [{"n": 8}]
