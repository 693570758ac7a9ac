"""Teams, Discord, Telegram and Twilio nodes against local emulators of their published
APIs (tests/fakes/messaging.py): authentication, bodies, error answers, 429 waits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest

from connectors import sdk
from connectors.builtin.messaging import discord, teams, telegram, twilio
from connectors.testing import ActionTestEnvironment
from tests.fakes.messaging import DiscordLike, TeamsLike, TelegramLike, TwilioLike
from tests.unit.connectors.output_schema import assert_declared_output


@pytest.fixture
def api(request: pytest.FixtureRequest) -> Iterator[Any]:
    server = request.param()
    server.start()
    yield server
    server.stop()


async def _run(
    env: ActionTestEnvironment, action: sdk.ActionDefinition, **config: Any
) -> dict[str, Any]:
    out = await env.run(action, {"credential": "c", **config}, None)
    assert_declared_output(action, out)
    return out  # type: ignore[no-any-return]


def _env(credential: dict[str, Any], **settings: str) -> ActionTestEnvironment:
    return ActionTestEnvironment(credentials={"c": credential}, settings=settings)


# -- Teams -----------------------------------------------------------------------------


@pytest.mark.parametrize("api", [TeamsLike], indirect=True)
async def test_teams_posts_an_adaptive_card(api: TeamsLike) -> None:
    env = _env({"type": "teams.webhook", "url": api.url + api.hook_path})
    out = await _run(env, teams.post_message, title="Deploy", text="**v2** is live")
    assert out == {"status": 202, "accepted": True}
    card = api.requests[0].body["attachments"][0]["content"]
    assert [b["text"] for b in card["body"]] == ["Deploy", "**v2** is live"]
    own = {"type": "AdaptiveCard", "version": "1.5", "body": []}
    await _run(env, teams.post_message, card=own)
    assert api.requests[1].body["attachments"][0]["content"] == own


@pytest.mark.parametrize("api", [TeamsLike], indirect=True)
async def test_teams_errors_keep_the_url_secret(api: TeamsLike) -> None:
    env = _env({"type": "teams.webhook", "url": api.url + api.hook_path})
    api.rate_limit_next = 1
    with pytest.raises(sdk.ActionError) as err:
        await _run(env, teams.post_message, text="x")
    assert err.value.retryable and err.value.retry_after == 2 and err.value.kind == "teams_http_429"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, teams.post_message, card={"type": "NotACard"})
    assert err.value.kind == "teams_http_400"
    wrong = _env({"type": "teams.webhook", "url": api.url + "/workflows/other?sig=wrong-sig-0000"})
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(wrong, teams.post_message, text="x")
    assert err.value.kind == "teams_http_404" and "wrong-sig" not in str(err.value)
    with pytest.raises(sdk.ConfigError):
        await _run(env, teams.post_message)


# -- Discord ---------------------------------------------------------------------------


def _discord(api: DiscordLike, token: str | None = None) -> ActionTestEnvironment:
    return _env(
        {"type": "discord.bot_token", "token": token or api.token},
        **{"discord.api_url": api.url + "/api/v10"},
    )


@pytest.mark.parametrize("api", [DiscordLike], indirect=True)
async def test_discord_bot_message_is_sent_once_per_step(api: DiscordLike) -> None:
    env = _discord(api)
    channel = next(iter(api.channels))
    out = await _run(env, discord.send_message, channel_id=channel, content="@everyone hi")
    assert out["channel_id"] == channel and out["content"] == "@everyone hi"
    first = api.requests[0]
    assert first.headers["authorization"] == f"Bot {api.token}"
    assert first.body["allowed_mentions"] == {"parse": []} and first.body["enforce_nonce"]
    again = await _run(env, discord.send_message, channel_id=channel, content="@everyone hi")
    assert again["id"] == out["id"]  # a retried attempt carries the same nonce


@pytest.mark.parametrize("api", [DiscordLike], indirect=True)
async def test_discord_webhook_and_errors(api: DiscordLike) -> None:
    hook = _env({"type": "discord.webhook", "url": api.url + "/api/webhooks/555/webhook-token-9e1"})
    out = await _run(hook, discord.webhook_message, content="from a hook", username="Railyard")
    assert out["content"] == "from a hook" and api.requests[0].path.endswith("?wait=true")
    gone = _env({"type": "discord.webhook", "url": api.url + "/api/webhooks/9/nope-token"})
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(gone, discord.webhook_message, content="x")
    assert err.value.kind == "discord_10015" and "webhooks/9" not in err.value.message
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_discord(api), discord.send_message, channel_id="1", content="x")
    assert err.value.kind == "discord_10003" and "Unknown Channel" in err.value.message
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_discord(api, "wrong"), discord.send_message, channel_id="1", content="x")
    assert err.value.kind == "discord_http_401"
    api.rate_limit_next = 1
    with pytest.raises(sdk.ActionError) as err:
        await _run(_discord(api), discord.send_message, channel_id="1", content="x")
    assert err.value.retryable and err.value.retry_after == 1.5  # the body's longer wait
    with pytest.raises(sdk.ConfigError):
        await _run(_discord(api), discord.send_message, channel_id="1")


# -- Telegram --------------------------------------------------------------------------


def _telegram(api: TelegramLike, token: str | None = None) -> ActionTestEnvironment:
    return ActionTestEnvironment(
        credentials={"c": {"type": "telegram.bot_token", "token": token or api.token}},
        credential_types=[telegram.BOT_TOKEN],
        settings={"telegram.api_url": api.url},
    )


@pytest.mark.parametrize("api", [TelegramLike], indirect=True)
async def test_telegram_send_and_errors(api: TelegramLike) -> None:
    env = _telegram(api)
    out = await _run(env, telegram.send_message, chat_id="42", text="hi", parse_mode="HTML")
    assert out["chat_id"] == 42 and out["text"] == "hi" and out["message_id"] > 0
    assert api.requests[0].body == {"chat_id": "42", "text": "hi", "parse_mode": "HTML"}
    numeric = await _run(env, telegram.send_message, chat_id=42, text="from an expression")
    assert numeric["chat_id"] == 42 and api.requests[1].body["chat_id"] == 42
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, telegram.send_message, chat_id="7", text="x")
    assert err.value.kind == "telegram_400" and "chat not found" in err.value.message
    api.rate_limit_next = 1
    with pytest.raises(sdk.ActionError) as err:
        await _run(env, telegram.send_message, chat_id="42", text="x")
    assert err.value.retryable and err.value.retry_after == 3
    wrong = "999:wrong-token-value"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_telegram(api, wrong), telegram.send_message, chat_id="42", text="x")
    assert err.value.kind == "telegram_401" and wrong not in str(err.value)


# -- Twilio ----------------------------------------------------------------------------


def _twilio(api: TwilioLike, token: str | None = None) -> ActionTestEnvironment:
    return ActionTestEnvironment(
        credentials={
            "c": {
                "type": "twilio",
                "account_sid": api.account_sid,
                "auth_token": token or api.auth_token,
            }
        },
        credential_types=[twilio.TWILIO],
        settings={"twilio.api_url": api.url},
    )


@pytest.mark.parametrize("api", [TwilioLike], indirect=True)
async def test_twilio_sends_sms_with_basic_auth_and_a_form(api: TwilioLike) -> None:
    out = await _run(
        _twilio(api),
        twilio.send_sms,
        to="+14155550100",
        body="Your code is 1234",
        from_number="+15005550006",
    )
    assert (
        out["status"] == "queued" and out["sid"].startswith("SM") and out["from"] == "+15005550006"
    )
    sent = parse_qs(api.requests[0].body)
    assert sent == {"To": ["+14155550100"], "Body": ["Your code is 1234"], "From": ["+15005550006"]}


@pytest.mark.parametrize("api", [TwilioLike], indirect=True)
async def test_twilio_errors(api: TwilioLike) -> None:
    env = _twilio(api)
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, twilio.send_sms, to="555", body="x", from_number="+15005550006")
    assert err.value.kind == "twilio_21211" and "not a valid phone number" in err.value.message
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, twilio.send_sms, to="+14155550100", body="x", from_number="+10000000000")
    assert err.value.kind == "twilio_21606"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(
            _twilio(api, "wrong-token-1234"),
            twilio.send_sms,
            to="+14155550100",
            body="x",
            from_number="+15005550006",
        )
    assert err.value.kind == "twilio_20003"
    api.rate_limit_next = 1
    with pytest.raises(sdk.ActionError) as err:
        await _run(env, twilio.send_sms, to="+14155550100", body="x", from_number="+15005550006")
    assert err.value.kind == "twilio_20429" and err.value.retryable and err.value.retry_after == 1
    with pytest.raises(sdk.ConfigError):
        await _run(env, twilio.send_sms, to="+14155550100", body="x")
