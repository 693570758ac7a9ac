"""Slack connector against a local Slack-like server (tests/fakes/apis.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors import sdk
from connectors.builtin.slack import post_message, webhook_message
from connectors.testing import ActionTestEnvironment
from tests.fakes.apis import SlackLike
from tests.unit.connectors.output_schema import assert_declared_output


@pytest.fixture
def slack() -> Iterator[SlackLike]:
    server = SlackLike().start()
    assert isinstance(server, SlackLike)
    yield server
    server.stop()


def _env(slack: SlackLike, token: str = "xoxb-valid-token") -> ActionTestEnvironment:
    return ActionTestEnvironment(
        settings={"slack.api_url": f"{slack.url}/api"},
        credentials={
            "bot": {"type": "slack.bot_token", "kind": "bearer", "token": token},
            "hook": {
                "type": "slack.incoming_webhook",
                "url": f"{slack.url}/hooks/T1/B1/secretpath",
            },
            "badhook": {"type": "slack.incoming_webhook", "url": f"{slack.url}/hooks/nope"},
        },
    )


async def test_post_text_blocks_and_thread_reply(slack: SlackLike) -> None:
    env = _env(slack)
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*hi*"}}]
    out = await env.run(
        post_message,
        {"credential": "bot", "channel": "#general", "text": "hi", "blocks": blocks},
        None,
    )
    assert out["ok"] is True and out["channel"] == "C123" and out["ts"]
    reply = await env.run(
        post_message,
        {"credential": "bot", "channel": "C123", "text": "in thread", "thread_ts": out["ts"]},
        None,
    )
    assert reply["thread_ts"] == out["ts"]
    first, second = slack.requests
    assert first.headers["authorization"] == "Bearer xoxb-valid-token"
    assert first.body["blocks"] == blocks
    assert second.body["thread_ts"] == out["ts"]
    assert env.credential_uses == [("bot", "credential"), ("bot", "credential")]


async def test_channel_not_found_is_a_clear_non_retryable_error(slack: SlackLike) -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _env(slack).run(
            post_message, {"credential": "bot", "channel": "C999", "text": "x"}, None
        )
    assert err.value.kind == "slack_channel_not_found"
    assert "channel_not_found" in err.value.message
    assert err.value.details["error"] == "channel_not_found"


async def test_invalid_auth_is_not_retryable(slack: SlackLike) -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _env(slack, token="xoxb-wrong").run(
            post_message, {"credential": "bot", "channel": "C123", "text": "x"}, None
        )
    assert err.value.kind == "slack_invalid_auth"


async def test_429_is_retryable_with_retry_after(slack: SlackLike) -> None:
    slack.rate_limit_next = 1
    env = _env(slack)
    with pytest.raises(sdk.ActionError) as err:
        await env.run(post_message, {"credential": "bot", "channel": "C123", "text": "x"}, None)
    assert err.value.retryable is True
    assert err.value.retry_after == 1.0
    assert err.value.kind == "http_429"
    out = await env.run(post_message, {"credential": "bot", "channel": "C123", "text": "x"}, None)
    assert out["ok"] is True


async def test_message_needs_text_or_blocks(slack: SlackLike) -> None:
    with pytest.raises(sdk.ConfigError):
        await _env(slack).run(post_message, {"credential": "bot", "channel": "C123"}, None)
    assert slack.requests == []


async def test_incoming_webhook(slack: SlackLike) -> None:
    env = _env(slack)
    out = await env.run(webhook_message, {"credential": "hook", "text": "deployed"}, None)
    assert out == {"ok": True, "status": 200}
    assert slack.posted[-1] == {"channel": "C123", "text": "deployed"}
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(webhook_message, {"credential": "badhook", "text": "x"}, None)
    assert err.value.kind == "slack_no_service"


async def test_wrong_credential_type_is_refused(slack: SlackLike) -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _env(slack).run(
            post_message, {"credential": "hook", "channel": "C123", "text": "x"}, None
        )
    assert err.value.kind == "credential_type_mismatch"


async def test_incoming_webhook_errors_never_show_the_webhook_url() -> None:
    env = ActionTestEnvironment(
        credentials={
            "hook": {"type": "slack.incoming_webhook", "url": "http://127.0.0.1:9/T1/B1/s3cret"}
        },
    )
    with pytest.raises(sdk.ActionError) as err:
        await env.run(webhook_message, {"credential": "hook", "text": "x"}, None)
    assert err.value.kind == "http_transport" and err.value.retryable
    assert "s3cret" not in err.value.message and "s3cret" not in str(err.value.details)
    assert "http://127.0.0.1:9/…" in err.value.message


async def test_post_message_output_matches_declared_schema(slack: SlackLike) -> None:
    env = _env(slack)
    top = await env.run(post_message, {"credential": "bot", "channel": "C123", "text": "a"}, None)
    assert top["thread_ts"] is None
    assert_declared_output(post_message, top)
    reply = await env.run(
        post_message,
        {"credential": "bot", "channel": "C123", "text": "b", "thread_ts": top["ts"]},
        None,
    )
    assert reply["thread_ts"] == top["ts"]
    assert_declared_output(post_message, reply)


async def test_webhook_message_output_matches_declared_schema(slack: SlackLike) -> None:
    out = await _env(slack).run(webhook_message, {"credential": "hook", "text": "hi"}, None)
    assert out["status"] == 200
    assert_declared_output(webhook_message, out)
