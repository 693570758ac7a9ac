"""Built-in Discord connector: ``discord.send_message`` (a bot, ``POST
/channels/{channel.id}/messages``) and ``discord.webhook_message`` (``POST
/webhooks/{id}/{token}?wait=true``), as documented in Discord's API reference
(resources "Message" and "Webhook").

- The bot sends ``Authorization: Bot <token>`` to ``<discord.api_url>`` (setting
  ``RAILYARD_DISCORD_API_URL``, default ``https://discord.com/api/v10``). The message
  carries a ``nonce`` derived from the step's idempotency key with ``enforce_nonce``, so
  Discord posts a retried send once (it deduplicates a nonce for a few minutes).
- A webhook URL is itself the secret (a ``discord.webhook`` credential); ``wait=true``
  makes Discord answer with the created message.

Body: ``content`` (up to 2000 characters), ``embeds`` (up to 10), and for webhooks an
optional ``username``. ``allowed_mentions`` defaults to none, so text from earlier steps
cannot ping ``@everyone``; ``mentions`` lets users, roles or everyone through.

Output: ``{"id", "channel_id", "content", "timestamp"}`` of the created message.

Errors: Discord's JSON error ``{"code", "message"}`` becomes kind ``discord_<code>``
(``discord_50006`` empty message, ``discord_10003`` unknown channel, ``discord_10015``
unknown webhook, ``discord_50013`` missing permissions; ``discord_http_<status>`` when the
answer has no code, as a 401 for a wrong token); not retryable. ``429`` answers
``{"retry_after": <s>, "global": bool}`` with ``Retry-After``: retryable after the
longer wait.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypedDict

import msgspec

from connectors import sdk
from connectors.builtin.messaging.common import body_of, post, service_error

__all__ = ["BOT_TOKEN", "WEBHOOK", "connector", "send_message", "webhook_message"]

DEFAULT_API_URL = "https://discord.com/api/v10"


class BotTokenFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Discord bot token (the bot needs Send Messages in the channel)."""

    token: Annotated[str, sdk.secret("Bot token")]


class WebhookFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Discord webhook URL (``https://discord.com/api/webhooks/<id>/<token>``)."""

    url: Annotated[str, sdk.secret("Webhook URL")]


BOT_TOKEN = sdk.credential_type(
    "discord.bot_token", label="Discord bot token", kind="bearer", fields=BotTokenFields
)
WEBHOOK = sdk.credential_type(
    "discord.webhook", label="Discord webhook", kind="custom", fields=WebhookFields
)

Content = Annotated[
    str,
    msgspec.Meta(title="Content", max_length=2000, extra_json_schema={"x-multiline": True}),
]
Embeds = Annotated[
    list[dict[str, Any]],
    msgspec.Meta(title="Embeds", description="Discord embed objects", max_length=10),
]
Mentions = Annotated[
    list[Literal["users", "roles", "everyone"]],
    msgspec.Meta(title="Allow mentions of", description="Empty: nobody is pinged"),
]


class SendMessageConfig(msgspec.Struct, kw_only=True):
    """Config of ``discord.send_message``."""

    credential: Annotated[str, sdk.credential_meta("discord.bot_token", title="Bot")]
    channel_id: Annotated[str, msgspec.Meta(title="Channel id", pattern=r"^\d{1,20}$")]
    content: Content = ""
    embeds: Embeds = []
    mentions: Mentions = []


class WebhookMessageConfig(msgspec.Struct, kw_only=True):
    """Config of ``discord.webhook_message``."""

    credential: Annotated[str, sdk.credential_meta("discord.webhook", title="Webhook")]
    content: Content = ""
    embeds: Embeds = []
    username: Annotated[str, msgspec.Meta(title="Username", max_length=80)] = ""
    mentions: Mentions = []


class DiscordMessage(TypedDict):
    """The created message: its `id`, `channel_id`, `content` and `timestamp` (ISO
    8601)."""

    id: str
    channel_id: str
    content: str
    timestamp: str


def _payload(content: str, embeds: list[dict[str, Any]], mentions: Sequence[str]) -> dict[str, Any]:
    if not content and not embeds:
        raise sdk.ConfigError("a Discord message needs content or embeds")
    payload: dict[str, Any] = {"allowed_mentions": {"parse": list(mentions)}}
    if content:
        payload["content"] = content
    if embeds:
        payload["embeds"] = embeds
    return payload


def _message(response: Any) -> DiscordMessage:
    if response.status_code >= 400:
        body = body_of(response)
        raise service_error(
            "Discord",
            response,
            code=body.get("code"),
            message=str(body.get("message") or ""),
            retry_after=body.get("retry_after")
            if isinstance(body.get("retry_after"), int | float)
            else None,
        )
    body = body_of(response)
    return {
        "id": str(body.get("id", "")),
        "channel_id": str(body.get("channel_id", "")),
        "content": str(body.get("content", "")),
        "timestamp": str(body.get("timestamp", "")),
    }


@sdk.action(
    "discord.send_message",
    label="Discord: send message",
    config=SendMessageConfig,
    category="Messaging",
    icon="message-circle",
    description="Send a message to a channel as a bot.",
    expression_fields=("channel_id", "content", "embeds"),
)
async def send_message(config: SendMessageConfig, input: Any) -> DiscordMessage:
    """``POST /channels/{channel_id}/messages`` with a nonce from the idempotency key."""
    base = str(sdk.setting("discord.api_url", DEFAULT_API_URL)).rstrip("/")
    url = f"{base}/channels/{config.channel_id}/messages"
    payload = _payload(config.content, config.embeds, config.mentions)
    payload["nonce"] = hashlib.sha256(sdk.info().idempotency_key.encode()).hexdigest()[:25]
    payload["enforce_nonce"] = True
    token = sdk.credential("credential")["token"]
    response = await post(
        "Discord", url, url, json=payload, headers={"Authorization": f"Bot {token}"}
    )
    return _message(response)


@sdk.action(
    "discord.webhook_message",
    label="Discord: webhook message",
    config=WebhookMessageConfig,
    category="Messaging",
    icon="message-circle",
    description="Post a message through a channel's webhook.",
    expression_fields=("content", "embeds", "username"),
)
async def webhook_message(config: WebhookMessageConfig, input: Any) -> DiscordMessage:
    """``POST <webhook URL>?wait=true``."""
    url = sdk.credential("credential")["url"]
    payload = _payload(config.content, config.embeds, config.mentions)
    if config.username:
        payload["username"] = config.username
    response = await post(
        "Discord", url, sdk.redact_url(url), json=payload, params={"wait": "true"}
    )
    return _message(response)


connector = sdk.Connector(
    name="discord",
    label="Discord",
    version="1.0.0",
    description="Send messages to Discord channels",
    actions=[send_message, webhook_message],
    credential_types=[BOT_TOKEN, WEBHOOK],
    icon="message-circle",
)
