"""Built-in Microsoft Teams connector: ``teams.post_message`` through a Teams workflow
webhook (the "Post to a channel when a webhook request is received" workflow, which
replaces the retired Office 365 connectors; its URL is the secret, kept in a
``teams.webhook`` credential).

The body is the message activity the workflow expects, one Adaptive Card attachment::

    {"type": "message", "attachments": [{
        "contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": null,
        "content": {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard", "version": "1.4", "body": [...]}}]}

``card`` (an Adaptive Card object) is sent as it is; otherwise the card is built from
``title`` (a bold, larger text block) and ``text`` (a wrapping text block; Teams renders
its Markdown subset). Teams answers ``202 Accepted`` (a workflow URL) or ``200`` (a
legacy connector URL). Output: ``{"status", "accepted"}``.

Errors: ``429`` (Teams throttles a webhook past a few requests per second) is retryable
after ``Retry-After``; ``400`` (a malformed card), ``401``/``403``/``404`` (a revoked or
wrong URL) are not (kind ``teams_http_<status>``). The URL never appears in a message:
errors show ``https://host/…``.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import msgspec

from connectors import sdk
from connectors.builtin.messaging.common import post, service_error

__all__ = ["TEAMS_WEBHOOK", "connector", "post_message"]

ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"


class TeamsWebhookFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Teams workflow (or legacy incoming) webhook URL."""

    url: Annotated[str, sdk.secret("Webhook URL")]


TEAMS_WEBHOOK = sdk.credential_type(
    "teams.webhook",
    label="Microsoft Teams webhook",
    kind="custom",
    fields=TeamsWebhookFields,
    description="The URL of a Teams channel's webhook workflow",
)


class TeamsMessageConfig(msgspec.Struct, kw_only=True):
    """Config of ``teams.post_message``."""

    credential: Annotated[str, sdk.credential_meta("teams.webhook", title="Webhook")]
    title: Annotated[str, msgspec.Meta(title="Title")] = ""
    text: Annotated[
        str,
        msgspec.Meta(title="Text", description="Markdown", extra_json_schema={"x-multiline": True}),
    ] = ""
    card: Annotated[
        dict[str, Any] | None,
        msgspec.Meta(title="Adaptive Card", description="Sent instead of title and text"),
    ] = None


class TeamsOutput(TypedDict):
    """Teams' answer: the HTTP `status` (202 or 200) and `accepted` (always true)."""

    status: int
    accepted: bool


def card_of(config: TeamsMessageConfig) -> dict[str, Any]:
    """The Adaptive Card to send (see the module docstring)."""
    if config.card is not None:
        return config.card
    if not config.title and not config.text:
        raise sdk.ConfigError("a Teams message needs a title, a text or a card")
    body: list[dict[str, Any]] = []
    if config.title:
        body.append(
            {
                "type": "TextBlock",
                "text": config.title,
                "weight": "Bolder",
                "size": "Medium",
                "wrap": True,
            }
        )
    if config.text:
        body.append({"type": "TextBlock", "text": config.text, "wrap": True})
    return {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
    }


@sdk.action(
    "teams.post_message",
    label="Microsoft Teams: post message",
    config=TeamsMessageConfig,
    category="Messaging",
    icon="users",
    description="Post a message or an Adaptive Card to a Teams channel's webhook.",
    expression_fields=("title", "text", "card"),
)
async def post_message(config: TeamsMessageConfig, input: Any) -> TeamsOutput:
    """POST the message activity to the webhook."""
    url = sdk.credential("credential")["url"]
    shown = sdk.redact_url(url)
    activity = {
        "type": "message",
        "attachments": [
            {"contentType": ADAPTIVE_CARD, "contentUrl": None, "content": card_of(config)}
        ],
    }
    response = await post("Microsoft Teams", url, shown, json=activity)
    if response.status_code >= 400:
        raise service_error("Teams", response)
    return {"status": response.status_code, "accepted": True}


connector = sdk.Connector(
    name="teams",
    label="Microsoft Teams",
    version="1.0.0",
    description="Post messages to Microsoft Teams channels",
    actions=[post_message],
    credential_types=[TEAMS_WEBHOOK],
    icon="users",
)
