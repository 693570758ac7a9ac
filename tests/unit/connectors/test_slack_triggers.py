"""Slack Events API triggers (connectors/builtin/slack_events.py) with Slack's documented
payloads (tests/fixtures/slack-*.json) and the Slack Events sender (tests/fakes/slack_events.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import uvicorn

from connectors import sdk
from connectors.builtin import slack
from connectors.builtin.slack_events import (
    MAX_BODY_BYTES,
    SLACK_APP,
    message_posted,
    reaction_added,
)
from connectors.testing import TriggerTestEnvironment
from tests.fakes.slack_events import SlackEvents, UrlVerificationFailed
from tests.unit.connectors.output_schema import assert_declared_output

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SECRET = "e2c4f2b6a1d94c0b8b8f3f0d4a5c6e7f"
NOW = 1_700_000_000.0


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _env(now: float | None = NOW, secret: str = SECRET) -> TriggerTestEnvironment:
    return TriggerTestEnvironment(
        now=now,
        credentials={"app": {"type": "slack.app", "signing_secret": secret}},
        credential_types=[SLACK_APP],
    )


def _signed(body: bytes, at: float = NOW, secret: str = SECRET) -> dict[str, str]:
    return SlackEvents(secret, clock=lambda: at).signed_headers(body)


def _envelope(event: dict[str, Any], event_id: str = "Ev0001") -> bytes:
    return json.dumps(
        SlackEvents(SECRET, clock=lambda: NOW).envelope(event, event_id=event_id)
    ).encode()


async def _push(
    trig: sdk.TriggerDefinition, body: bytes, config: dict[str, Any] | None = None, **kw: Any
) -> sdk.PushResponse:
    headers = kw.pop("headers", None) or _signed(body)
    return await _env().push(
        trig, {"credential": "app", **(config or {})}, body=body, headers=headers, **kw
    )


# -- Slack's documented examples ------------------------------------------------------


async def test_slacks_documented_signature_example_verifies() -> None:
    example = json.loads(fixture("slack-signature-example.json"))
    env = _env(now=float(example["timestamp"]) + 10, secret=example["signing_secret"])
    headers = {
        "X-Slack-Request-Timestamp": example["timestamp"],
        "X-Slack-Signature": example["signature"],
    }
    # The signature is right, so the delivery gets past it; its body is a slash command
    # (form-encoded), which is no Events API delivery.
    with pytest.raises(sdk.DeliveryRefused) as refused:
        await env.push(message_posted, {"credential": "app"}, body=example["body"], headers=headers)
    assert (refused.value.status, refused.value.reason) == (400, "payload")
    wrong = {**headers, "X-Slack-Signature": example["signature"][:-1] + "0"}
    with pytest.raises(sdk.DeliveryRefused) as refused:
        await env.push(message_posted, {"credential": "app"}, body=example["body"], headers=wrong)
    assert (refused.value.status, refused.value.reason) == (401, "signature")


async def test_a_signed_message_delivery_is_one_event_with_the_event_id() -> None:
    body = fixture("slack-event-message.json")
    answer = await _push(message_posted, body)
    assert answer.status == 200 and answer.body is None
    (event,) = answer.events
    assert event.id == "Ev123ABC456" and event.meta == {"delivery_id": "Ev123ABC456"}
    # The example the catalog shows is this documented delivery.
    assert event.data == message_posted.output_example
    assert (event.data["text"], event.data["user"]) == ("Live long and prospect.", "U2147483697")
    assert (event.data["channel"], event.data["ts"]) == ("C024BE91L", "1355517523.000005")
    assert (event.data["team_id"], event.data["event_time"]) == ("T123ABC456", 1234567890)
    assert event.data["subtype"] is None and event.data["blocks"] == []
    assert_declared_output(message_posted, event.data)  # type: ignore[arg-type]
    assert_declared_output(message_posted, message_posted.output_example)  # type: ignore[arg-type]


async def test_a_signed_reaction_delivery_is_one_event() -> None:
    answer = await _push(reaction_added, fixture("slack-event-reaction-added.json"))
    (event,) = answer.events
    assert event.id == "Ev456DEF789"
    assert event.data["reaction"] == "thumbsup" and event.data["user"] == "U123ABC456"
    assert event.data["item"] == {
        "type": "message",
        "channel": "C123ABC456",
        "ts": "1360782400.498405",
    }
    assert (event.data["channel"], event.data["message_ts"]) == ("C123ABC456", "1360782400.498405")
    assert event.data["item_user"] == "U222222222" and event.data["event_time"] == 1360782804
    assert_declared_output(reaction_added, event.data)  # type: ignore[arg-type]
    assert_declared_output(reaction_added, reaction_added.output_example)  # type: ignore[arg-type]


async def test_url_verification_answers_the_challenge_and_starts_nothing() -> None:
    body = fixture("slack-url-verification.json")
    for trig in (message_posted, reaction_added):
        answer = await _push(trig, body)
        assert answer.events == [] and answer.status == 200
        assert answer.body == "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    with pytest.raises(sdk.DeliveryRefused) as refused:
        await _push(message_posted, body, headers={"Content-Type": "application/json"})
    assert refused.value.reason == "signature"  # the handshake is signed too


# -- refused deliveries -----------------------------------------------------------------


async def _refused(body: bytes, headers: dict[str, str], **kw: Any) -> tuple[int, str]:
    with pytest.raises(sdk.DeliveryRefused) as refused:
        await _push(message_posted, body, headers=headers, **kw)
    assert refused.value.message
    return refused.value.status, refused.value.reason


async def test_unsigned_mis_signed_replayed_and_oversized_deliveries_are_refused() -> None:
    body = fixture("slack-event-message.json")
    good = _signed(body)
    unsigned = {"X-Slack-Request-Timestamp": good["X-Slack-Request-Timestamp"]}
    assert await _refused(body, unsigned) == (401, "signature")
    assert await _refused(body, _signed(body, secret="another app's secret")) == (401, "signature")
    tampered = body.replace(b"Live long", b"Die young")
    assert await _refused(tampered, good) == (401, "signature")
    no_prefix = {**good, "X-Slack-Signature": good["X-Slack-Signature"][3:]}
    assert await _refused(body, no_prefix) == (401, "signature")
    # Slack's replay window is 5 minutes either way; a resigned old timestamp is still old.
    assert await _refused(body, _signed(body, at=NOW - 301)) == (401, "replay")
    assert await _refused(body, _signed(body, at=NOW + 301)) == (401, "replay")
    no_time = {"X-Slack-Signature": good["X-Slack-Signature"]}
    assert await _refused(body, no_time) == (401, "replay")
    assert len((await _push(message_posted, body, headers=_signed(body, at=NOW - 299))).events) == 1
    # Signed correctly, but over the size limit.
    big = _envelope({"type": "message", "channel": "C1", "text": "x" * MAX_BODY_BYTES})
    assert await _refused(big, _signed(big)) == (413, "size")
    assert await _refused(body, good, method="GET") == (405, "method")


async def test_signed_bodies_that_are_not_events_are_refused_as_payload() -> None:
    for body in (b"{not json", b"[1, 2]", json.dumps({"type": "event_callback"}).encode()):
        assert await _refused(body, _signed(body)) == (400, "payload")


async def test_retries_carry_the_same_event_id_so_they_dedupe() -> None:
    body = fixture("slack-event-message.json")
    first = await _push(message_posted, body)
    retry_headers = {
        **_signed(body),
        "X-Slack-Retry-Num": "1",
        "X-Slack-Retry-Reason": "http_timeout",
    }
    retried = await _push(message_posted, body, headers=retry_headers)
    assert [e.id for e in retried.events] == [e.id for e in first.events] == ["Ev123ABC456"]
    assert retried.events[0].data == first.events[0].data


# -- filters -----------------------------------------------------------------------------

BOT_MESSAGE = {  # Slack's documented bot_message subtype example
    "type": "message",
    "subtype": "bot_message",
    "ts": "1358877455.000010",
    "text": "Pushing is the answer",
    "bot_id": "BB12033",
    "username": "github",
    "icons": {},
}
MESSAGE_CHANGED = {  # Slack's documented message_changed subtype example
    "type": "message",
    "subtype": "message_changed",
    "hidden": True,
    "channel": "C123ABC456",
    "ts": "1358878755.000001",
    "message": {
        "type": "message",
        "user": "U123ABC456",
        "text": "Hello, world!",
        "ts": "1355517523.000005",
        "edited": {"user": "U123ABC456", "ts": "1358878755.000001"},
    },
}


def _message(**fields: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "C123ABC456",
        "user": "U1",
        "text": "hi",
        "ts": "1.2",
        **fields,
    }


async def _ids(trig: sdk.TriggerDefinition, event: dict[str, Any], **config: Any) -> list[str]:
    answer = await _push(trig, _envelope(event), config)
    assert answer.status == 200
    return [e.id for e in answer.events]


async def test_message_filters_channels_bots_and_subtypes() -> None:
    assert await _ids(message_posted, _message()) == ["Ev0001"]
    assert await _ids(message_posted, _message(), channels=["C123ABC456", "G0OTHER"]) == ["Ev0001"]
    assert await _ids(message_posted, _message(), channels=["C999"]) == []
    assert await _ids(message_posted, {**BOT_MESSAGE, "channel": "C123ABC456"}) == []
    assert await _ids(message_posted, _message(bot_id="B0APP")) == []  # an app's own post
    assert await _ids(message_posted, _message(bot_id="B0APP"), ignore_bots=False) == ["Ev0001"]
    assert await _ids(message_posted, MESSAGE_CHANGED) == []
    assert await _ids(message_posted, MESSAGE_CHANGED, only_new_messages=False) == ["Ev0001"]
    assert await _ids(message_posted, _message(subtype="channel_join")) == []
    reply = _message(subtype="thread_broadcast", thread_ts="1.1")
    answer = await _push(message_posted, _envelope(reply))
    assert answer.events[0].data["thread_ts"] == "1.1"
    assert answer.events[0].data["subtype"] == "thread_broadcast"
    shared = _message(subtype="file_share", files=[{"id": "F1", "name": "a.png"}], blocks="bad")
    data = (await _push(message_posted, _envelope(shared))).events[0].data
    assert data["files"] == [{"id": "F1", "name": "a.png"}] and data["blocks"] == []
    assert_declared_output(message_posted, data)  # type: ignore[arg-type]


async def test_events_of_other_types_and_envelopes_start_nothing() -> None:
    reaction = json.loads(fixture("slack-event-reaction-added.json"))["event"]
    assert await _ids(message_posted, reaction) == []
    assert await _ids(reaction_added, _message()) == []
    limited = json.dumps(
        {
            "token": "x",
            "type": "app_rate_limited",
            "team_id": "T1",
            "minute_rate_limited": 1518467820,
            "api_app_id": "A1",
        }
    ).encode()
    answer = await _push(message_posted, limited)
    assert answer.events == [] and answer.status == 200


async def test_reaction_filters_emoji_with_any_skin_tone_and_channels() -> None:
    reaction = json.loads(fixture("slack-event-reaction-added.json"))["event"]
    toned = {**reaction, "reaction": "+1::skin-tone-2"}
    assert await _ids(reaction_added, reaction, emoji=["thumbsup"]) == ["Ev0001"]
    assert await _ids(reaction_added, toned, emoji=[":thumbsup:"]) == ["Ev0001"]
    assert await _ids(reaction_added, toned, emoji=["+1", "eyes"]) == ["Ev0001"]
    assert await _ids(reaction_added, toned, emoji=["eyes"]) == []
    assert await _ids(reaction_added, reaction, channels=["C123ABC456"]) == ["Ev0001"]
    assert await _ids(reaction_added, reaction, channels=["C0OTHER"]) == []
    on_file = {**reaction, "item": {"type": "file", "file": "F123ABC456"}}
    data = (await _push(reaction_added, _envelope(on_file))).events[0].data
    assert data["item"] == {"type": "file", "file": "F123ABC456"}
    assert data["channel"] is None and data["message_ts"] is None
    assert_declared_output(reaction_added, data)  # type: ignore[arg-type]


async def test_bad_config_and_missing_credential_are_clear_errors() -> None:
    body = fixture("slack-event-message.json")
    with pytest.raises(sdk.ConfigError, match="channels"):
        await _push(message_posted, body, {"channels": ["#general"]})
    with pytest.raises(sdk.ConfigError, match="emoji"):
        await _push(reaction_added, body, {"emoji": ["two words"]})
    with pytest.raises(sdk.NonRetryableError) as err:
        await _env().push(message_posted, {"credential": "nope"}, body=body, headers=_signed(body))
    assert err.value.kind == "credential_missing"


def test_the_slack_connector_declares_the_triggers_and_the_app_credential() -> None:
    assert {t.type: t.kind for t in slack.connector.triggers} == {
        "slack.message_posted": "app_webhook",
        "slack.reaction_added": "app_webhook",
    }
    assert all(t.response_deadline == 3.0 and t.register is None for t in slack.connector.triggers)
    assert SLACK_APP in slack.connector.credential_types
    assert SLACK_APP.secret_fields == ("signing_secret",)
    schema = message_posted.config_json_schema()
    assert schema["properties"]["credential"]["x-credential-type"] == "slack.app"
    assert schema["required"] == ["credential"]


# -- the Slack Events sender against a served trigger URL --------------------------------


class TriggerUrl:
    """The trigger's URL served over HTTP the way the product answers it: ``receive``
    through :class:`TriggerTestEnvironment`, a refused delivery answered with its status,
    one run per event id. ``fail_next`` answers 500 and ``slow_next`` sleeps ``slow``
    seconds before answering, for that many requests."""

    def __init__(self, trig: sdk.TriggerDefinition, config: dict[str, Any]) -> None:
        self.trig, self.config = trig, config
        self.env = TriggerTestEnvironment(
            now=None,
            credentials={"app": {"type": "slack.app", "signing_secret": SECRET}},
            credential_types=[SLACK_APP],
        )
        self.requests: list[dict[str, str]] = []
        self.runs: dict[str, Any] = {}
        self.fail_next = 0
        self.slow_next = 0
        self.slow = 0.0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.requests.append(headers)
        if self.slow_next:
            self.slow_next -= 1
            await asyncio.sleep(self.slow)
        if self.fail_next:
            self.fail_next -= 1
            return await self._answer(send, 500, b"store unavailable", "text/plain")
        try:
            answer = await self.env.push(
                self.trig, self.config, body=body, headers=headers, method=scope["method"]
            )
        except sdk.DeliveryRefused as refused:
            return await self._answer(send, refused.status, refused.message.encode(), "text/plain")
        for event in answer.events:
            self.runs.setdefault(event.id, event.data)
        if isinstance(answer.body, str):
            return await self._answer(send, answer.status, answer.body.encode(), "text/plain")
        return await self._answer(
            send, answer.status, msgspec.json.encode(answer.body), "application/json"
        )

    @staticmethod
    async def _answer(send: Any, status: int, payload: bytes, media: str) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", media.encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
async def served() -> AsyncIterator[tuple[TriggerUrl, str]]:
    app = TriggerUrl(message_posted, {"credential": "app"})
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    for _ in range(1000):  # up to 10 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield app, f"http://127.0.0.1:{port}/hooks/app/test-token"
    finally:
        server.should_exit = True
        await task


async def test_the_sender_verifies_the_url_and_delivers_signed_events(
    served: tuple[TriggerUrl, str],
) -> None:
    app, url = served
    slack_events = SlackEvents(SECRET, retry_delays=(0.0, 0.0, 0.0))
    assert await slack_events.verify_url(url)
    delivery = await slack_events.send_event(url, _message(text="order #42"))
    assert delivery.delivered and [a.status for a in delivery.attempts] == [200]
    assert (
        list(app.runs) == [delivery.event_id] and app.runs[delivery.event_id]["text"] == "order #42"
    )
    assert app.requests[-1]["x-slack-signature"].startswith("v0=")
    with pytest.raises(UrlVerificationFailed, match="HTTP error: 401"):
        await SlackEvents("not the app's secret").verify_url(url)


async def test_the_sender_retries_failures_and_timeouts_with_the_same_event_id(
    served: tuple[TriggerUrl, str],
) -> None:
    app, url = served
    slack_events = SlackEvents(SECRET, timeout=0.5, retry_delays=(0.0, 0.05, 0.05))
    app.fail_next, app.slow_next, app.slow = 1, 1, 1.0
    delivery = await slack_events.send_event(url, _message(), event_id="EvRETRY1")
    attempts = [(a.retry_num, a.retry_reason, a.status, a.failure) for a in delivery.attempts]
    # The slow answer comes first (the sleep precedes the failure), then a 500, then 200.
    assert attempts == [
        (0, None, None, "http_timeout"),
        (1, "http_timeout", 500, "http_error"),
        (2, "http_error", 200, None),
    ]
    retry_headers = [
        (h.get("x-slack-retry-num"), h.get("x-slack-retry-reason")) for h in app.requests
    ]
    assert retry_headers == [(None, None), ("1", "http_timeout"), ("2", "http_error")]
    await asyncio.sleep(0.6)  # the timed-out first attempt finishes on the server
    assert list(app.runs) == ["EvRETRY1"]  # every attempt was the same event: one run


async def test_the_sender_gives_up_after_three_retries(served: tuple[TriggerUrl, str]) -> None:
    app, url = served
    app.fail_next = 10
    delivery = await SlackEvents(SECRET, retry_delays=(0.0, 0.0, 0.0)).send_event(url, _message())
    assert not delivery.delivered and [a.retry_num for a in delivery.attempts] == [0, 1, 2, 3]
    assert app.runs == {}


async def test_a_stale_delivery_from_the_sender_is_refused_as_a_replay(
    served: tuple[TriggerUrl, str],
) -> None:
    app, url = served
    stale = SlackEvents(SECRET, clock=lambda: time.time() - 600, retry_delays=())
    delivery = await stale.send_event(url, _message())
    assert [a.status for a in delivery.attempts] == [401] and app.runs == {}
