"""Built-in Slack connector: ``slack.post_message`` (Web API), ``slack.webhook_message``,
and the Events API triggers ``slack.message_posted`` and ``slack.reaction_added``
(:mod:`connectors.builtin.slack_events`, credential type ``slack.app``).

``slack.post_message`` calls ``POST <slack.api_url>/chat.postMessage`` (setting
``RAILYARD_SLACK_API_URL``, default ``https://slack.com/api``) with
``Authorization: Bearer <token>`` and a JSON body ``{channel, text, blocks, thread_ts,
reply_broadcast, unfurl_links}``, as documented at
https://api.slack.com/methods/chat.postMessage. Output: ``{"ok": true, "channel", "ts",
"thread_ts"}`` (``ts`` of the posted message; pass it as ``thread_ts`` to reply in thread).

``slack.webhook_message`` posts ``{text, blocks}`` to an incoming-webhook URL (stored as
a secret credential, since the URL is the secret). Slack answers ``200 ok`` or a status
with a plain-text error code (``400 invalid_payload``, ``403 action_prohibited``,
``404 channel_not_found``, ``410 channel_is_archived``...).

Errors:

- ``{"ok": false, "error": "<code>"}``: a step error of kind ``slack_<code>`` with the
  code in the message and ``details.error``. ``ratelimited``, ``internal_error``,
  ``fatal_error``, ``service_unavailable`` and ``request_timeout`` are retryable; every
  other code (``channel_not_found``, ``not_in_channel``, ``invalid_auth``,
  ``invalid_blocks``, ...) is not.
- HTTP 429: retryable, waiting ``Retry-After`` seconds (Slack's rate limiting); other
  5xx retryable; other 4xx not.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import httpx
import msgspec

from connectors import sdk
from connectors.builtin.slack_events import SLACK_APP, message_posted, reaction_added

__all__ = ["BOT_TOKEN", "INCOMING_WEBHOOK", "connector", "post_message", "webhook_message"]

DEFAULT_API_URL = "https://slack.com/api"
RETRYABLE_CODES = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class BotTokenFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Slack bot token (``xoxb-...``) with the ``chat:write`` scope."""

    token: Annotated[str, sdk.secret("Bot token", "xoxb-...")]


class IncomingWebhookFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Slack incoming-webhook URL (``https://hooks.slack.com/services/...``)."""

    url: Annotated[str, sdk.secret("Webhook URL")]


class SlackOAuth2Fields(sdk.OAuth2Fields, kw_only=True, forbid_unknown_fields=True):
    """Slack's OAuth2 v2 endpoints (``chat:write`` scope)."""


BOT_TOKEN = sdk.credential_type(
    "slack.bot_token", label="Slack bot token", kind="bearer", fields=BotTokenFields
)
INCOMING_WEBHOOK = sdk.credential_type(
    "slack.incoming_webhook",
    label="Slack incoming webhook",
    kind="custom",
    fields=IncomingWebhookFields,
)
SLACK_OAUTH2 = sdk.credential_type(
    "slack.oauth2",
    label="Slack (OAuth2)",
    kind="oauth2",
    fields=SlackOAuth2Fields,
    defaults={
        "authorize_url": "https://slack.com/oauth/v2/authorize",
        "token_url": "https://slack.com/api/oauth.v2.access",
        "scope": "chat:write",
    },
)


class PostMessageConfig(msgspec.Struct, kw_only=True):
    """Config of ``slack.post_message``."""

    credential: Annotated[str, sdk.credential_meta("slack.bot_token", "slack.oauth2")]
    channel: Annotated[str, msgspec.Meta(title="Channel", description="Channel id or #name")]
    text: Annotated[
        str, msgspec.Meta(title="Text", description="Message text (fallback when blocks are set)")
    ] = ""
    blocks: Annotated[
        list[dict[str, Any]] | None, msgspec.Meta(title="Blocks", description="Block Kit blocks")
    ] = None
    thread_ts: Annotated[
        str, msgspec.Meta(title="Thread ts", description="Reply in this message's thread")
    ] = ""
    reply_broadcast: Annotated[bool, msgspec.Meta(title="Also send to channel")] = False
    unfurl_links: Annotated[bool, msgspec.Meta(title="Unfurl links")] = True


class WebhookMessageConfig(msgspec.Struct, kw_only=True):
    """Config of ``slack.webhook_message``."""

    credential: Annotated[str, sdk.credential_meta("slack.incoming_webhook")]
    text: Annotated[str, msgspec.Meta(title="Text")] = ""
    blocks: Annotated[list[dict[str, Any]] | None, msgspec.Meta(title="Blocks")] = None


def _need_content(text: str, blocks: list[dict[str, Any]] | None) -> None:
    if not text and not blocks:
        raise sdk.ConfigError("a Slack message needs text or blocks")


def _slack_error(code: str, where: str, response: httpx.Response) -> sdk.ActionError:
    message = f"Slack {where} failed: {code}"
    details = {"error": code, "status": response.status_code}
    if code in RETRYABLE_CODES:
        retry_after = sdk.parse_retry_after(response.headers.get("retry-after"))
        return sdk.ActionError(
            message, kind=f"slack_{code}", retry_after=retry_after, details=details
        )
    return sdk.NonRetryableError(message, kind=f"slack_{code}", details=details)


async def _post(url: str, shown_url: str, **kwargs: Any) -> httpx.Response:
    """POST with network errors mapped to step errors; ``shown_url`` is what messages show."""
    with sdk.http_errors(shown_url, method="POST", service="Slack"):
        return await sdk.http_client().post(url, **kwargs)


class PostMessageOutput(TypedDict):
    """Slack's answer: `ok` (always true; Slack errors fail the step), the `channel` id,
    the message `ts` (its id) and the `thread_ts` of its thread (`null` outside one)."""

    ok: bool
    channel: str | None
    ts: str | None
    thread_ts: str | None


@sdk.action(
    "slack.post_message",
    label="Slack: post message",
    config=PostMessageConfig,
    category="Slack",
    icon="message-square",
    description="Post a message (text or Block Kit, optionally in a thread) with a bot token.",
    expression_fields=("channel", "text", "blocks", "thread_ts"),
)
async def post_message(config: PostMessageConfig, input: Any) -> PostMessageOutput:
    """Call chat.postMessage and map Slack's ``ok: false`` codes to step errors."""
    _need_content(config.text, config.blocks)
    cred = sdk.credential("credential")
    token = cred.get("access_token") or cred.get("token")
    body: dict[str, Any] = {"channel": config.channel, "unfurl_links": config.unfurl_links}
    if config.text:
        body["text"] = config.text
    if config.blocks:
        body["blocks"] = config.blocks
    if config.thread_ts:
        body["thread_ts"] = config.thread_ts
        body["reply_broadcast"] = config.reply_broadcast
    base = str(sdk.setting("slack.api_url", DEFAULT_API_URL)).rstrip("/")
    url = f"{base}/chat.postMessage"
    response = await _post(
        url,
        url,
        json=body,
        headers={"Authorization": f"Bearer {token}"},
    )
    if response.status_code == 429 or response.status_code >= 400:
        sdk.raise_for_status(response)
    try:
        data = response.json()
    except ValueError:
        raise sdk.ActionError(
            f"Slack answered HTTP {response.status_code} without JSON", kind="slack_bad_response"
        ) from None
    if not data.get("ok"):
        raise _slack_error(str(data.get("error") or "unknown_error"), "chat.postMessage", response)
    message = data.get("message") or {}
    return {
        "ok": True,
        "channel": data.get("channel"),
        "ts": data.get("ts"),
        "thread_ts": message.get("thread_ts") or config.thread_ts or None,
    }


class WebhookMessageOutput(TypedDict):
    """`ok` (always true; Slack errors fail the step) and the HTTP `status` Slack sent."""

    ok: bool
    status: int


@sdk.action(
    "slack.webhook_message",
    label="Slack: incoming webhook",
    config=WebhookMessageConfig,
    category="Slack",
    icon="message-square",
    description="Send a message to the channel of an incoming-webhook URL.",
    expression_fields=("text", "blocks"),
)
async def webhook_message(config: WebhookMessageConfig, input: Any) -> WebhookMessageOutput:
    """POST ``{text, blocks}`` to the incoming webhook; Slack answers ``ok`` or an error code."""
    _need_content(config.text, config.blocks)
    body: dict[str, Any] = {}
    if config.text:
        body["text"] = config.text
    if config.blocks:
        body["blocks"] = config.blocks
    url = sdk.credential("credential")["url"]
    shown = sdk.redact_url(url)  # the incoming-webhook URL is the secret
    response = await _post(url, shown, json=body)
    if response.status_code == 429 or response.status_code >= 500:
        sdk.raise_for_status(response, url=shown)
    if response.status_code >= 400:
        code = response.text.strip() or f"http_{response.status_code}"
        raise _slack_error(code, "incoming webhook", response)
    return {"ok": True, "status": response.status_code}


connector = sdk.Connector(
    name="slack",
    label="Slack",
    version="1.0.0",
    description="Post Slack messages with a bot token or an incoming webhook; start runs "
    "from messages and reactions (Events API)",
    actions=[post_message, webhook_message],
    triggers=[message_posted, reaction_added],
    credential_types=[BOT_TOKEN, INCOMING_WEBHOOK, SLACK_OAUTH2, SLACK_APP],
    icon="message-square",
    docs_url="https://api.slack.com/methods/chat.postMessage",
)
