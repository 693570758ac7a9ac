"""Wire types of outgoing event subscriptions (docs/api.md, "Event subscriptions"),
shared by the workflow and the admin subscription routes, and the handlers' common steps
(each controller only says which subscriptions it reaches)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from backend.api.lists import ListPage
from backend.services.subscriptions import catalogue, manage
from backend.services.subscriptions.sending import MESSAGE_ID_PREFIX, Outcome, message_id

EventType = Annotated[
    catalogue.EventType,
    msgspec.Meta(description="an event type of the catalogue (docs/api.md, 'Event catalogue')"),
]
PORT = "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
URL_PATTERN = f"^https?://[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*(:{PORT})?([/?#][!-~]*)?$"
"""What a receiver URL looks like (checked before the SSRF policy is asked)."""

Url = Annotated[
    str,
    msgspec.Meta(
        min_length=8,
        max_length=manage.MAX_URL,
        pattern=URL_PATTERN,
        description=(
            "the receiver: an absolute http or https URL (host name or IPv4 address, an"
            " internationalised name in its xn-- form; printable ASCII) the SSRF policy lets"
            " through"
        ),
    ),
]
Description = Annotated[str, msgspec.Meta(max_length=500)]


Events = Annotated[list[EventType], msgspec.Meta(min_length=1)]
StrictBool = Literal[True, False]
"""``true`` or ``false`` only: Litestar converts bodies leniently (``0`` would pass as
``false`` for a plain ``bool``), a literal is checked exactly."""


class SubscriptionIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST .../subscriptions on a workflow: where to send which events."""

    url: Url
    events: Events
    description: Description = ""


class ProjectSubscriptionIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/v1/admin/subscriptions: ``project_id`` names the project whose
    workflows' events are sent (``null``: every workflow's)."""

    url: Url
    events: Events
    description: Description = ""
    project_id: uuid.UUID | None = None


class SubscriptionPatch(msgspec.Struct, forbid_unknown_fields=True):
    """PATCH body: omitted members keep their value; ``enabled: true`` re-enables a
    disabled subscription (its failure count starts again at 0)."""

    url: Url | msgspec.UnsetType = msgspec.UNSET
    events: Events | msgspec.UnsetType = msgspec.UNSET
    description: Description | msgspec.UnsetType = msgspec.UNSET
    enabled: StrictBool | msgspec.UnsetType = msgspec.UNSET


class SubscriptionOut(msgspec.Struct):
    """A subscription (the signing secret is only in the creation's answer)."""

    id: uuid.UUID
    url: str
    events: list[EventType]
    description: str
    enabled: bool
    workflow_id: uuid.UUID | None
    project_id: uuid.UUID | None
    consecutive_failures: int
    retry_at: datetime | None
    disabled_at: datetime | None
    disabled_reason: str | None
    created_at: datetime


class SubscriptionCreated(SubscriptionOut):
    """The new subscription with ``secret``, its Standard Webhooks signing secret
    (``whsec_...``): shown this once, keep it to verify signatures."""

    secret: str = ""


class AttemptOut(msgspec.Struct):
    """One attempt: when, what answered (``status_code``, the first characters of the
    answer in ``response``) or why nothing did (``error``), ``duration_ms``, and
    ``manual`` for a re-send."""

    number: int
    at: datetime
    status_code: int | None
    response: str
    error: str | None
    duration_ms: int
    manual: bool


WebhookId = Annotated[
    str,
    msgspec.Meta(
        pattern=f"^{MESSAGE_ID_PREFIX}[0-9a-f]{{32}}$",
        description="The `webhook-id` header every attempt of this delivery carries: `msg_` "
        "and the delivery's `id` as 32 lower-case hex digits, without dashes (`id` "
        "0b6f1c9e-6f55-4c57-9a55-2f7b8f0d4e21 is msg_0b6f1c9e6f554c579a552f7b8f0d4e21)",
        examples=["msg_0b6f1c9e6f554c579a552f7b8f0d4e21"],
    ),
]


class DeliveryOut(msgspec.Struct):
    """One message: its ``webhook_id``, event type, ``status`` (``pending``,
    ``delivered``, ``failed``: given up), the JSON ``payload`` sent, and its attempts
    (newest first)."""

    id: uuid.UUID
    webhook_id: WebhookId
    event_type: str
    status: str
    run_id: uuid.UUID | None
    created_at: datetime
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    payload: dict[str, Any]
    attempts: list[AttemptOut]


class SubscriptionList(ListPage):
    """A page of subscriptions, oldest first."""

    data: list[SubscriptionOut]


class DeliveryList(ListPage):
    """A page of deliveries, newest first, each with its attempts."""

    data: list[DeliveryOut]


class ResendOut(msgspec.Struct):
    """What a re-send got: ``acknowledged`` (a 2xx) and the attempt."""

    acknowledged: bool
    status_code: int | None
    error: str | None
    duration_ms: int


def subscription_out(sub: Any, secret: str | None = None) -> SubscriptionOut:
    """Wire form of a subscription (with ``secret`` right after creation)."""
    values = {f: getattr(sub, f) for f in SubscriptionOut.__struct_fields__}
    values["events"] = list(sub.events)
    if secret is not None:
        return SubscriptionCreated(**values, secret=secret)
    return SubscriptionOut(**values)


def delivery_out(view: manage.DeliveryView) -> DeliveryOut:
    """Wire form of a delivery and its attempts."""
    d = view.delivery
    return DeliveryOut(
        id=d.id,
        webhook_id=message_id(d.id),
        event_type=d.event_type,
        status=d.status,
        run_id=d.run_id,
        created_at=d.created_at,
        next_attempt_at=d.next_attempt_at if d.status == "pending" else None,
        delivered_at=d.delivered_at,
        payload=msgspec.json.decode(d.body),
        attempts=[
            AttemptOut(a.number, a.at, a.status_code, a.response, a.error, a.duration_ms, a.manual)
            for a in view.attempts
        ],
    )


def resend_out(outcome: Outcome) -> ResendOut:
    """Wire form of a re-send's outcome."""
    return ResendOut(outcome.acknowledged, outcome.status_code, outcome.error, outcome.duration_ms)


def changes(data: SubscriptionPatch) -> dict[str, Any]:
    """The members a PATCH body sets."""
    return {
        f: getattr(data, f)
        for f in SubscriptionPatch.__struct_fields__
        if getattr(data, f) is not msgspec.UNSET
    }
