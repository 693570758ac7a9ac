"""Built-in Twilio connector: ``twilio.send_sms`` through Twilio's Messaging API
(``POST <twilio.api_url>/2010-04-01/Accounts/{AccountSid}/Messages.json``, setting
``RAILYARD_TWILIO_API_URL``, default ``https://api.twilio.com``), as Twilio's REST API
reference describes the Message resource.

The request is form-encoded (``To``, ``From`` or ``MessagingServiceSid``, ``Body``) and
authenticated with HTTP Basic: the Account SID as user name and the Auth Token (or an
API key SID and secret) as password. Twilio answers ``201 Created`` with the Message
resource; the SMS is then ``queued`` and sent by Twilio.

Output: ``{"sid", "status", "to", "from", "body", "date_created"}``.

Twilio has no idempotency key for messages: a retried attempt whose first try reached
Twilio sends the SMS again. The default retry policy (one attempt) never does; raise it
for this node only if a duplicate SMS is acceptable.

Errors: Twilio's error body ``{"code", "message", "more_info", "status"}`` becomes kind
``twilio_<code>``: ``21211`` (an invalid To number), ``21606`` (a From number that
cannot send), ``21610`` (the recipient unsubscribed), ``20003`` (a wrong login, HTTP
401), ... are not retryable; ``20429`` (HTTP 429, too many requests) is, after
``Retry-After`` when Twilio sends one; 5xx answers are retryable.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import httpx
import msgspec

from connectors import sdk
from connectors.builtin.messaging.common import body_of, post, service_error

__all__ = ["TWILIO", "connector", "send_sms"]

DEFAULT_API_URL = "https://api.twilio.com"


class TwilioFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Twilio account: its SID and Auth Token (or an API key SID and secret, with the
    account SID)."""

    account_sid: Annotated[str, msgspec.Meta(title="Account SID", pattern=r"^AC[0-9a-fA-F]{32}$")]
    auth_token: Annotated[str, sdk.secret("Auth token")]
    api_key_sid: Annotated[
        str, msgspec.Meta(title="API key SID", description="Log in with an API key instead")
    ] = ""


TWILIO = sdk.credential_type("twilio", label="Twilio account", kind="custom", fields=TwilioFields)


class SendSmsConfig(msgspec.Struct, kw_only=True):
    """Config of ``twilio.send_sms``."""

    credential: Annotated[str, sdk.credential_meta("twilio", title="Account")]
    to: Annotated[
        str, msgspec.Meta(title="To", description="E.164, e.g. +14155550100", min_length=2)
    ]
    body: Annotated[
        str,
        msgspec.Meta(
            title="Message", min_length=1, max_length=1600, extra_json_schema={"x-multiline": True}
        ),
    ]
    from_number: Annotated[
        str, msgspec.Meta(title="From", description="A Twilio number in E.164")
    ] = ""
    messaging_service_sid: Annotated[
        str, msgspec.Meta(title="Messaging service SID", description="Instead of From")
    ] = ""


TwilioMessage = TypedDict(
    "TwilioMessage",
    {"sid": str, "status": str, "to": str, "from": str, "body": str, "date_created": str},
)
TwilioMessage.__doc__ = """The Message resource Twilio created: its `sid`, `status` (`queued`, ...),
`to`, `from`, `body` and `date_created` (RFC 2822, as Twilio gives it)."""


@sdk.action(
    "twilio.send_sms",
    label="Twilio: send SMS",
    config=SendSmsConfig,
    category="Messaging",
    icon="smartphone",
    description="Send an SMS through Twilio's Messaging API.",
    expression_fields=("to", "body", "from_number"),
)
async def send_sms(config: SendSmsConfig, input: Any) -> TwilioMessage:
    """Create a Message resource."""
    if not config.from_number and not config.messaging_service_sid:
        raise sdk.ConfigError("an SMS needs a From number or a messaging service SID")
    account = sdk.credential("credential")
    sid = account["account_sid"]
    user = account.get("api_key_sid") or sid
    base = str(sdk.setting("twilio.api_url", DEFAULT_API_URL)).rstrip("/")
    url = f"{base}/2010-04-01/Accounts/{sid}/Messages.json"
    form = {"To": config.to, "Body": config.body}
    if config.messaging_service_sid:
        form["MessagingServiceSid"] = config.messaging_service_sid
    else:
        form["From"] = config.from_number
    response = await post(
        "Twilio", url, url, data=form, auth=httpx.BasicAuth(user, account["auth_token"])
    )
    body = body_of(response)
    if response.status_code >= 400:
        raise service_error(
            "Twilio", response, code=body.get("code"), message=str(body.get("message") or "")
        )
    return {
        "sid": str(body.get("sid", "")),
        "status": str(body.get("status", "")),
        "to": str(body.get("to", "")),
        "from": str(body.get("from", "")),
        "body": str(body.get("body", "")),
        "date_created": str(body.get("date_created", "")),
    }


connector = sdk.Connector(
    name="twilio",
    label="Twilio",
    version="1.0.0",
    description="Send SMS through Twilio",
    actions=[send_sms],
    credential_types=[TWILIO],
    icon="smartphone",
)
