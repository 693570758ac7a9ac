"""The SDK's trigger kinds and the trigger test harness (connectors.testing)."""

from __future__ import annotations

import msgspec
import pytest

from connectors import sdk
from connectors.testing import TriggerTestEnvironment


class Feed(msgspec.Struct):
    prefix: str = "item"


@sdk.polling_trigger("demo.items", label="New items", config=Feed, interval=60, min_interval=5)
async def new_items(config: Feed, cursor: int | None) -> sdk.PollResult:
    """Three items per poll, numbered after the cursor."""
    start = cursor or 0
    events = [
        sdk.TriggerEvent(id=f"{config.prefix}-{n}", data={"n": n})
        for n in range(start + 1, start + 4)
    ]
    return sdk.PollResult(events=events, cursor=start + 3)


SECRET = "s3cret"


async def _register(config: Feed, url: str) -> sdk.Registration:
    return sdk.Registration(remote_id="hook-1", secret=SECRET, data={"url": url})


async def _check(config: Feed, registration: sdk.Registration) -> bool:
    return registration.remote_id == "hook-1"


async def _unregister(config: Feed, registration: sdk.Registration) -> None:
    return None


@sdk.app_webhook_trigger(
    "demo.pushed",
    label="Pushed",
    config=Feed,
    register=_register,
    check=_check,
    unregister=_unregister,
    response_deadline=3,
)
async def pushed(
    config: Feed, request: sdk.PushRequest, registration: sdk.Registration | None
) -> sdk.PushResponse:
    """Signed deliveries of one event each; a challenge is echoed."""
    body = request.json()
    if "challenge" in body:
        return sdk.PushResponse(body=body["challenge"])
    assert registration is not None
    sdk.check_timestamp(request.headers.get("x-timestamp", ""), request.received_at)
    message = request.headers.get("x-timestamp", "").encode() + b"." + request.body
    sdk.verify_hmac(registration.secret, message, request.headers.get("x-signature", ""))
    return sdk.PushResponse(events=[sdk.TriggerEvent(id=body["id"], data=body)])


def test_trigger_kinds_are_declared_with_their_code() -> None:
    assert new_items.kind == "polling" and new_items.poll is not None
    assert new_items.description == "Three items per poll, numbered after the cursor."
    assert pushed.kind == "app_webhook" and pushed.response_deadline == 3.0
    assert sdk.trigger("demo.hook", label="Hook").kind == "webhook"
    with pytest.raises(ValueError, match="needs its code"):
        sdk.trigger("demo.poll", label="Poll", source="schedule")
    with pytest.raises(ValueError, match="min_interval"):
        sdk.polling_trigger("demo.x", label="X", interval=10, min_interval=20)
    with pytest.raises(ValueError, match="need register"):
        sdk.app_webhook_trigger("demo.y", label="Y", check=_check)


async def test_poll_advances_the_cursor() -> None:
    env = TriggerTestEnvironment()
    first = await env.poll(new_items, {"prefix": "a"}, cursor=None)
    assert [e.id for e in first.events] == ["a-1", "a-2", "a-3"]
    later = await env.poll(new_items, {"prefix": "a"}, cursor=first.cursor)
    assert [e.id for e in later.events] == ["a-4", "a-5", "a-6"] and later.cursor == 6


async def test_push_verifies_signature_and_replay_window() -> None:
    env = TriggerTestEnvironment(now=1_000_000.0)
    registration = await env.register(pushed, {})
    assert registration.data == {"url": env.url}
    assert await env.check(pushed, {}, registration)
    body = msgspec.json.encode({"id": "Ev1"})
    signature = sdk.hmac_hex(SECRET, b"1000000." + body)
    headers = {"X-Timestamp": "1000000", "X-Signature": signature}
    answer = await env.push(pushed, {}, body=body, headers=headers, registration=registration)
    assert [e.id for e in answer.events] == ["Ev1"]
    with pytest.raises(sdk.DeliveryRefused) as refused:
        await env.push(
            pushed,
            {},
            body=body,
            headers={**headers, "X-Signature": "0" * 64},
            registration=registration,
        )
    assert (refused.value.status, refused.value.reason) == (401, "signature")
    stale = TriggerTestEnvironment(now=1_000_000.0 + 301)
    with pytest.raises(sdk.DeliveryRefused) as replayed:
        await stale.push(pushed, {}, body=body, headers=headers, registration=registration)
    assert replayed.value.reason == "replay"
    challenge = await env.push(pushed, {}, body={"challenge": "abc"})
    assert challenge.body == "abc" and challenge.events == []
    with pytest.raises(sdk.DeliveryRefused) as bad:
        await env.push(pushed, {}, body=b"{not json")
    assert bad.value.status == 400
    await env.unregister(pushed, {}, registration)


@sdk.listen_trigger("demo.queue", label="Queue", kind="broker")
async def queue(config: object, emit: sdk.Emit) -> None:
    """Two messages, one of them undecodable, then a third valid one."""
    await emit(sdk.TriggerEvent(id="m1", data={"n": 1}))
    await emit.dead_letter("not JSON", b"\xff", {"message_id": "m2"})
    await emit(sdk.TriggerEvent(id="m3", data={"n": 3}))
    raise AssertionError("acked past the end of the test subscription")


async def test_listen_records_events_and_dead_letters() -> None:
    got = await TriggerTestEnvironment().listen(queue, {}, count=2)
    assert [e.id for e in got.events] == ["m1", "m3"]
    assert [(d.reason, d.meta) for d in got.dead_letters] == [("not JSON", {"message_id": "m2"})]
