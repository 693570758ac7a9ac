"""Slack Events API triggers: ``slack.message_posted`` and ``slack.reaction_added``.

Both are app webhooks (push): Slack POSTs each event to the trigger's own URL, which the
user pastes as the *Request URL* on the Slack app's **Event Subscriptions** page. Slack
sets that URL in the app's configuration, not through an API, so these triggers have no
``register`` hook; Slack's ``url_verification`` handshake, answered here, is what proves
the URL when it is saved. What follows is Slack's documented behaviour ("Using the Slack
Events API", "Verifying requests from Slack", the ``message`` and ``reaction_added``
event pages):

- **Signature (v0).** Every request carries ``X-Slack-Request-Timestamp`` (Unix seconds)
  and ``X-Slack-Signature: v0=<hex>``, the HMAC-SHA256 under the app's *signing secret*
  of ``v0:<timestamp>:<raw body>``. An unsigned or mis-signed request is refused with
  401 (reason ``signature``), one signed more than 5 minutes from the time it arrives
  with 401 (reason ``replay``), a body over :data:`MAX_BODY_BYTES` with 413 (``size``),
  a body that is not a JSON object with 400 (``payload``).
- **Handshake.** ``{"type": "url_verification", "challenge": ...}`` (signed like any
  event) is answered 200 with the challenge as plain text and starts no run.
- **Events.** ``{"type": "event_callback", "event_id", "event_time", "team_id",
  "api_app_id", "event": {...}}`` gives one event whose id is ``event_id`` (the dedupe
  key: one run per event id) and whose data is the event's fields flattened with the
  envelope's (:class:`SlackMessage`, :class:`SlackReaction`).
- **Retries.** Slack retries a delivery that was not answered 2xx within 3 seconds up
  to three times (``X-Slack-Retry-Num``, ``X-Slack-Retry-Reason``) with the same
  ``event_id``, so a retry is the same event and starts no second run.
- **Everything else** (other envelope types such as ``app_rate_limited``, other event
  types, events the trigger's filters leave out) is answered 200 without events: a
  non-2xx answer would only make Slack retry it.

The signing secret is the app's, not issued per hook: it is a credential of type
``slack.app`` (Slack: *Basic Information* -> *App Credentials* -> *Signing Secret*)
named by the trigger's ``credential`` field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, NotRequired, TypedDict

import msgspec

from connectors import sdk

__all__ = [
    "MAX_BODY_BYTES",
    "REPLAY_WINDOW",
    "SLACK_APP",
    "MessagePostedConfig",
    "ReactionAddedConfig",
    "SlackMessage",
    "SlackReaction",
    "message_posted",
    "reaction_added",
    "signature_base",
]

REPLAY_WINDOW = 300.0
"""Seconds a signed request stays valid ("Verifying requests from Slack": 5 minutes)."""

MAX_BODY_BYTES = 1024 * 1024
"""Largest delivery accepted (Railyard's limit; Slack's events are a few kilobytes: a
message's text is at most 40,000 characters and 50 blocks)."""

RESPONSE_DEADLINE = 3.0
"""Seconds Slack waits for the answer before it counts a delivery failed and retries."""

POSTED_SUBTYPES = frozenset({"file_share", "thread_broadcast", "me_message"})
"""Message subtypes that are still a new message someone posted (with a file, a thread
reply also sent to the channel, a ``/me`` message); every other subtype (``bot_message``,
``message_changed``, ``message_deleted``, ``channel_join``, ...) is a change, a bot or a
notice."""

REACTION_ALIASES = {"thumbsup": "+1", "thumbsdown": "-1"}
"""Emoji names users type that Slack reports under another name (Slack sends ``+1`` for
the thumbs-up reaction)."""


class SlackAppFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Slack app's signing secret, which signs every request Slack sends the app's
    Request URLs (*Basic Information* -> *App Credentials* -> *Signing Secret*)."""

    signing_secret: Annotated[str, sdk.secret("Signing secret", "32 hexadecimal characters")]


SLACK_APP = sdk.credential_type(
    "slack.app",
    label="Slack app (Events API)",
    kind="custom",
    fields=SlackAppFields,
    description="The signing secret from the app's Basic Information page.",
)

AppCredential = Annotated[
    str,
    sdk.credential_meta(
        "slack.app",
        title="Slack app",
        description="The Slack app whose Event Subscriptions send to this trigger's URL.",
    ),
]
ChannelId = Annotated[str, msgspec.Meta(pattern=r"^[CGD][A-Z0-9]{2,}$")]
Channels = Annotated[
    list[ChannelId],
    msgspec.Meta(
        title="Channels",
        description="Channel ids (C0123ABCD; a channel's id is at the bottom of its "
        "details) to hear; empty: every channel the app receives events from.",
    ),
]


class MessagePostedConfig(msgspec.Struct, kw_only=True):
    """Config of ``slack.message_posted``."""

    credential: AppCredential
    channels: Channels = []
    ignore_bots: Annotated[
        bool,
        msgspec.Meta(
            title="Ignore bot messages",
            description="Skip messages posted by apps and bots (this workflow's own Slack "
            "posts included), so a workflow that posts to Slack does not trigger itself.",
        ),
    ] = True
    only_new_messages: Annotated[
        bool,
        msgspec.Meta(
            title="Only new messages",
            description="Skip edits, deletions and notices (message subtypes other than "
            "file_share, thread_broadcast and me_message).",
        ),
    ] = True


class ReactionAddedConfig(msgspec.Struct, kw_only=True):
    """Config of ``slack.reaction_added``."""

    credential: AppCredential
    emoji: Annotated[
        list[Annotated[str, msgspec.Meta(pattern=r"^:?[^\s:]+:?$")]],
        msgspec.Meta(
            title="Emoji",
            description="Emoji names (eyes, white_check_mark or :eyes:) to hear, any skin "
            "tone; empty: every reaction.",
        ),
    ] = []
    channels: Channels = []


class SlackMessage(TypedDict):
    """A message posted in a channel the app is in (Slack's ``message`` event, flattened
    with its envelope): `text` and `user` of the message, its `channel` id and
    `channel_type` (channel, group, im, mpim), its `ts` (the message id: pass it as
    thread_ts to reply in thread) and `thread_ts` (set on thread replies); `event_id`
    is the dedupe key."""

    event_id: str
    event_time: int
    team_id: str
    api_app_id: str
    type: str
    subtype: str | None
    channel: str
    channel_type: str | None
    user: str | None
    bot_id: str | None
    text: str
    ts: str
    thread_ts: str | None
    event_ts: str | None
    blocks: list[dict[str, Any]]
    files: list[dict[str, Any]]


class ReactionItem(TypedDict):
    """What was reacted to: a `message` (`channel` and `ts`), a `file` or a
    `file_comment`."""

    type: str
    channel: NotRequired[str]
    ts: NotRequired[str]
    file: NotRequired[str]
    file_comment: NotRequired[str]


class SlackReaction(TypedDict):
    """An emoji reaction added to an item (Slack's ``reaction_added`` event, flattened
    with its envelope): who reacted (`user`), the emoji name (`reaction`, e.g. `+1` or
    `eyes`, with a `::skin-tone-N` suffix when one was chosen), the author of the item
    (`item_user`), the `item`, and for a message its `channel` and `message_ts`."""

    event_id: str
    event_time: int
    team_id: str
    api_app_id: str
    type: str
    user: str
    reaction: str
    item_user: str | None
    item: ReactionItem
    channel: str | None
    message_ts: str | None
    event_ts: str | None


def signature_base(timestamp: str, body: bytes) -> bytes:
    """Slack's v0 signature base string ``v0:<timestamp>:<raw body>`` (bytes)."""
    return b"v0:" + timestamp.encode() + b":" + body


def _verified(request: sdk.PushRequest) -> dict[str, Any]:
    """The decoded body of a delivery Slack signed; raises :class:`sdk.DeliveryRefused`
    (405 method, 413 size, 401 signature or replay, 400 payload)."""
    if request.method.upper() != "POST":
        raise sdk.DeliveryRefused(405, "method", "Slack delivers events with POST")
    if len(request.body) > MAX_BODY_BYTES:
        raise sdk.DeliveryRefused(
            413, "size", f"the delivery is larger than {MAX_BODY_BYTES} bytes"
        )
    signature = request.headers.get("x-slack-signature", "")
    if not signature:
        raise sdk.DeliveryRefused(
            401, "signature", "the delivery is not signed (no X-Slack-Signature header)"
        )
    timestamp = request.headers.get("x-slack-request-timestamp", "").strip()
    sdk.check_timestamp(timestamp, request.received_at, REPLAY_WINDOW)
    secret = str(sdk.credential("credential").get("signing_secret") or "")
    if not secret:
        raise sdk.NonRetryableError(
            "the Slack app credential has no signing secret", kind="credential_invalid"
        )
    sdk.verify_hmac(secret, signature_base(timestamp, request.body), signature, prefix="v0=")
    body = request.json()
    if not isinstance(body, dict):
        raise sdk.DeliveryRefused(400, "payload", "the body is not a JSON object")
    return body


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _objects(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _envelope_fields(envelope: dict[str, Any], event_id: str) -> dict[str, Any]:
    event_time = envelope.get("event_time")
    return {
        "event_id": event_id,
        "event_time": event_time if isinstance(event_time, int) else 0,
        "team_id": str(envelope.get("team_id") or ""),
        "api_app_id": str(envelope.get("api_app_id") or ""),
    }


Shape = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]


async def _receive(request: sdk.PushRequest, event_type: str, shape: Shape) -> sdk.PushResponse:
    """Verify ``request``, answer the handshake, and turn an ``event_callback`` of
    ``event_type`` into one event with ``shape(envelope fields, event)`` as its data
    (``None``: filtered out)."""
    body = _verified(request)
    kind = body.get("type")
    if kind == "url_verification":
        challenge = body.get("challenge")
        if not isinstance(challenge, str) or not challenge:
            raise sdk.DeliveryRefused(400, "payload", "url_verification without a challenge")
        return sdk.PushResponse(body=challenge)
    if kind == "app_rate_limited":
        sdk.logger().warning(
            "Slack stopped sending events to app %s for the rest of this minute "
            "(over 30,000 events per workspace per hour)",
            body.get("api_app_id"),
        )
        return sdk.PushResponse()
    if kind != "event_callback":
        return sdk.PushResponse()
    event, event_id = body.get("event"), body.get("event_id")
    if not isinstance(event, dict) or not isinstance(event_id, str) or not event_id:
        raise sdk.DeliveryRefused(400, "payload", "an event_callback needs event and event_id")
    if len(event_id) > 200:
        raise sdk.DeliveryRefused(400, "payload", "the event_id is longer than 200 characters")
    if event.get("type") != event_type:
        return sdk.PushResponse()
    data = shape(_envelope_fields(body, event_id), event)
    if data is None:
        return sdk.PushResponse()
    found = sdk.TriggerEvent(id=event_id, data=data, meta={"delivery_id": event_id})
    return sdk.PushResponse(events=[found])


def _message(config: MessagePostedConfig, head: dict[str, Any], event: dict[str, Any]) -> Any:
    subtype = _text(event.get("subtype"))
    bot_id = _text(event.get("bot_id"))
    channel = _text(event.get("channel")) or ""
    if config.channels and channel not in config.channels:
        return None
    if config.ignore_bots and (bot_id or subtype == "bot_message"):
        return None
    if config.only_new_messages and subtype is not None and subtype not in POSTED_SUBTYPES:
        return None
    message: SlackMessage = {
        **head,  # type: ignore[typeddict-item]
        "type": "message",
        "subtype": subtype,
        "channel": channel,
        "channel_type": _text(event.get("channel_type")),
        "user": _text(event.get("user")),
        "bot_id": bot_id,
        "text": _text(event.get("text")) or "",
        "ts": _text(event.get("ts")) or "",
        "thread_ts": _text(event.get("thread_ts")),
        "event_ts": _text(event.get("event_ts")),
        "blocks": _objects(event.get("blocks")),
        "files": _objects(event.get("files")),
    }
    return message


def _emoji_name(name: str) -> str:
    """``":+1::skin-tone-2:"`` -> ``"+1"``: the name without colons and skin tone."""
    base = name.strip().strip(":").split("::")[0].lower()
    return REACTION_ALIASES.get(base, base)


def _reaction(config: ReactionAddedConfig, head: dict[str, Any], event: dict[str, Any]) -> Any:
    raw = event.get("item")
    raw_item: dict[str, Any] = raw if isinstance(raw, dict) else {}
    item: ReactionItem = {"type": str(raw_item.get("type") or "")}
    for key in ("channel", "ts", "file", "file_comment"):
        if isinstance(raw_item.get(key), str):
            item[key] = raw_item[key]  # type: ignore[literal-required]
    reaction = _text(event.get("reaction")) or ""
    if config.emoji and _emoji_name(reaction) not in {_emoji_name(e) for e in config.emoji}:
        return None
    if config.channels and item.get("channel") not in config.channels:
        return None
    out: SlackReaction = {
        **head,  # type: ignore[typeddict-item]
        "type": "reaction_added",
        "user": _text(event.get("user")) or "",
        "reaction": reaction,
        "item_user": _text(event.get("item_user")),
        "item": item,
        "channel": item.get("channel"),
        "message_ts": item.get("ts") if item["type"] == "message" else None,
        "event_ts": _text(event.get("event_ts")),
    }
    return out


_ENVELOPE_EXAMPLE = {  # Slack's documented examples (tests/fixtures/slack-event-*.json)
    "event_id": "Ev123ABC456",
    "event_time": 1234567890,
    "team_id": "T123ABC456",
    "api_app_id": "A123ABC456",
}


@sdk.app_webhook_trigger(
    "slack.message_posted",
    label="Slack: message posted",
    config=MessagePostedConfig,
    response_deadline=RESPONSE_DEADLINE,
    category="Slack",
    icon="message-square",
    description="Start a run for each message posted in a channel the Slack app is in "
    "(Events API; paste the trigger URL into the app's Event Subscriptions).",
    output=SlackMessage,
    output_example={
        **_ENVELOPE_EXAMPLE,
        "type": "message",
        "subtype": None,
        "channel": "C024BE91L",
        "channel_type": "channel",
        "user": "U2147483697",
        "bot_id": None,
        "text": "Live long and prospect.",
        "ts": "1355517523.000005",
        "thread_ts": None,
        "event_ts": "1355517523.000005",
        "blocks": [],
        "files": [],
    },
)
async def message_posted(
    config: MessagePostedConfig, request: sdk.PushRequest, registration: sdk.Registration | None
) -> sdk.PushResponse:
    """A ``message`` event: one run per ``event_id``, unless the channel, bot or subtype
    filters leave it out."""
    return await _receive(request, "message", lambda head, ev: _message(config, head, ev))


@sdk.app_webhook_trigger(
    "slack.reaction_added",
    label="Slack: reaction added",
    config=ReactionAddedConfig,
    response_deadline=RESPONSE_DEADLINE,
    category="Slack",
    icon="smile",
    description="Start a run for each emoji reaction added to a message or file the "
    "Slack app can see (Events API), optionally only for some emoji.",
    output=SlackReaction,
    output_example={
        **_ENVELOPE_EXAMPLE,
        "type": "reaction_added",
        "user": "U123ABC456",
        "reaction": "thumbsup",
        "item_user": "U222222222",
        "item": {"type": "message", "channel": "C123ABC456", "ts": "1360782400.498405"},
        "channel": "C123ABC456",
        "message_ts": "1360782400.498405",
        "event_ts": "1360782804.083113",
    },
)
async def reaction_added(
    config: ReactionAddedConfig, request: sdk.PushRequest, registration: sdk.Registration | None
) -> sdk.PushResponse:
    """A ``reaction_added`` event: one run per ``event_id``, unless the emoji or channel
    filters leave it out."""
    return await _receive(request, "reaction_added", lambda head, ev: _reaction(config, head, ev))
