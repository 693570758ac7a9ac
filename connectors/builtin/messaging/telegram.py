"""Built-in Telegram connector: ``telegram.send_message`` through the Bot API
(``POST <telegram.api_url>/bot<token>/sendMessage``, setting
``RAILYARD_TELEGRAM_API_URL``, default ``https://api.telegram.org``), as the Bot API
documentation describes it.

Body: ``chat_id`` (a chat id or ``@channelusername``), ``text`` (1-4096 characters),
``parse_mode`` (``MarkdownV2``, ``HTML`` or none), ``disable_notification``,
``reply_to_message_id``. The token travels in the URL path, as the Bot API requires; it
is a credential secret, so it is redacted from every error and log line.

Output: ``{"message_id", "chat_id", "date", "text"}`` from the ``Message`` in
``result`` (``date`` is Unix seconds).

Errors: the Bot API answers ``{"ok": false, "error_code", "description", "parameters"}``.
The kind is ``telegram_<error_code>``: ``400`` (``chat not found``, a malformed entity
in MarkdownV2), ``401`` (a wrong token), ``403`` (the bot was blocked or removed) are not
retryable; ``429`` (``Too Many Requests: retry after N``) is, after
``parameters.retry_after`` seconds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

import msgspec

from connectors import sdk
from connectors.builtin.messaging.common import body_of, post, service_error

__all__ = ["BOT_TOKEN", "connector", "send_message"]

DEFAULT_API_URL = "https://api.telegram.org"


class BotTokenFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Telegram bot token from @BotFather (``123456:ABC-DEF...``)."""

    token: Annotated[str, sdk.secret("Bot token", "123456:ABC-DEF...")]


BOT_TOKEN = sdk.credential_type(
    "telegram.bot_token", label="Telegram bot token", kind="custom", fields=BotTokenFields
)


class SendMessageConfig(msgspec.Struct, kw_only=True):
    """Config of ``telegram.send_message``."""

    credential: Annotated[str, sdk.credential_meta("telegram.bot_token", title="Bot")]
    chat_id: Annotated[
        str | int, msgspec.Meta(title="Chat", description="A chat id or @channelusername")
    ]
    text: Annotated[
        str,
        msgspec.Meta(
            title="Text", min_length=1, max_length=4096, extra_json_schema={"x-multiline": True}
        ),
    ]
    parse_mode: Annotated[
        Literal["", "MarkdownV2", "HTML"],
        msgspec.Meta(
            title="Formatting",
            extra_json_schema={
                "x-enum-labels": {"": "Plain text", "MarkdownV2": "MarkdownV2", "HTML": "HTML"}
            },
        ),
    ] = ""
    disable_notification: Annotated[bool, msgspec.Meta(title="Send silently")] = False
    reply_to_message_id: Annotated[int | None, msgspec.Meta(title="Reply to message id")] = None


class TelegramMessage(TypedDict):
    """The sent message: its `message_id`, the `chat_id`, the `date` (Unix seconds) and
    its `text`."""

    message_id: int
    chat_id: int
    date: int
    text: str


@sdk.action(
    "telegram.send_message",
    label="Telegram: send message",
    config=SendMessageConfig,
    category="Messaging",
    icon="send",
    description="Send a text message to a chat as a bot.",
    expression_fields=("chat_id", "text", "reply_to_message_id"),
)
async def send_message(config: SendMessageConfig, input: Any) -> TelegramMessage:
    """``sendMessage``."""
    base = str(sdk.setting("telegram.api_url", DEFAULT_API_URL)).rstrip("/")
    token = sdk.credential("credential")["token"]
    if config.chat_id == "":
        raise sdk.ConfigError("a Telegram message needs a chat id")
    payload: dict[str, Any] = {"chat_id": config.chat_id, "text": config.text}
    if config.parse_mode:
        payload["parse_mode"] = config.parse_mode
    if config.disable_notification:
        payload["disable_notification"] = True
    if config.reply_to_message_id is not None:
        payload["reply_to_message_id"] = config.reply_to_message_id
    shown = f"{base}/bot…/sendMessage"
    response = await post("Telegram", f"{base}/bot{token}/sendMessage", shown, json=payload)
    body = body_of(response)
    if response.status_code >= 400 or body.get("ok") is not True:
        parameters = body.get("parameters")
        wait = parameters.get("retry_after") if isinstance(parameters, dict) else None
        raise service_error(
            "Telegram",
            response,
            code=body.get("error_code") or response.status_code,
            message=str(body.get("description") or ""),
            retry_after=float(wait) if isinstance(wait, int | float) else None,
        )
    message = body.get("result") or {}
    return {
        "message_id": int(message.get("message_id", 0)),
        "chat_id": int((message.get("chat") or {}).get("id", 0)),
        "date": int(message.get("date", 0)),
        "text": str(message.get("text", "")),
    }


connector = sdk.Connector(
    name="telegram",
    label="Telegram",
    version="1.0.0",
    description="Send messages with a Telegram bot",
    actions=[send_message],
    credential_types=[BOT_TOKEN],
    icon="send",
)
