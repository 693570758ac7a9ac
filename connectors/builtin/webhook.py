"""Built-in Outgoing Webhook connector: ``webhook.send``.

Sends ``POST <url>`` with a JSON body and a signature so the receiver can verify the
sender and reject replays. Signature format (documented in docs/connectors.md)::

    X-Railyard-Timestamp: <unix seconds>
    X-Railyard-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body bytes>")>
    Idempotency-Key: <stable across retries of this step>

The body is the compact UTF-8 JSON encoding of ``payload``. Receivers recompute the HMAC
over ``timestamp + "." + body`` with the shared secret (a ``webhook_secret`` credential),
compare in constant time, and reject timestamps older than a few minutes.

Output: ``{"status": int, "body": <JSON or text>}``. Errors as ``http.request``
(429/503 retryable with ``Retry-After``, other 4xx not).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Annotated, Any, TypedDict

import msgspec

from connectors import sdk
from connectors.builtin.http import decode_body

__all__ = ["WEBHOOK_SECRET", "WebhookSendConfig", "connector", "sign", "webhook_send"]

SIGNATURE_HEADER = "X-Railyard-Signature"
TIMESTAMP_HEADER = "X-Railyard-Timestamp"


class WebhookSecretFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The shared secret of an outgoing webhook."""

    secret: Annotated[str, sdk.secret("Signing secret")]


WEBHOOK_SECRET = sdk.credential_type(
    "webhook_secret",
    label="Webhook signing secret",
    kind="custom",
    fields=WebhookSecretFields,
    description="Shared secret for the X-Railyard-Signature HMAC",
)


class WebhookSendConfig(msgspec.Struct, kw_only=True):
    """Config of ``webhook.send``."""

    url: Annotated[str, msgspec.Meta(title="URL", extra_json_schema={"format": "uri"})]
    payload: Annotated[Any, msgspec.Meta(title="Payload", description="JSON body")] = None
    credential: Annotated[
        str | None, sdk.credential_meta("webhook_secret", title="Signing secret")
    ] = None
    headers: Annotated[dict[str, str], msgspec.Meta(title="Extra headers")] = {}
    request_timeout: Annotated[float, msgspec.Meta(title="Timeout (s)", gt=0)] = 30.0


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>`` HMAC-SHA256 of ``b"<timestamp>." + body`` keyed with ``secret``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


class WebhookSendOutput(TypedDict):
    """The receiver's HTTP `status` (below 400; others fail the step) and its decoded `body`
    (JSON when it sent JSON, else text; `null` when empty)."""

    status: int
    body: Any


@sdk.action(
    "webhook.send",
    label="Outgoing webhook",
    config=WebhookSendConfig,
    category="HTTP",
    icon="send",
    description="POST signed JSON to a URL (HMAC-SHA256 signature header).",
    expression_fields=("url", "payload", "headers"),
)
async def webhook_send(config: WebhookSendConfig, input: Any) -> WebhookSendOutput:
    """POST the payload (the step input when no payload is set), signed when a secret is set."""
    payload = input if config.payload is None else config.payload
    body = msgspec.json.encode(payload)
    headers = {
        **config.headers,
        "Content-Type": "application/json",
        "Idempotency-Key": sdk.info().idempotency_key,
    }
    if config.credential:
        timestamp = int(time.time())
        headers[TIMESTAMP_HEADER] = str(timestamp)
        headers[SIGNATURE_HEADER] = sign(sdk.credential("credential")["secret"], timestamp, body)
    with sdk.http_errors(config.url, method="POST", timeout=config.request_timeout):
        response = await sdk.http_client().post(
            config.url, content=body, headers=headers, timeout=config.request_timeout
        )
    sdk.raise_for_status(response)
    return {"status": response.status_code, "body": decode_body(response, "POST")}


connector = sdk.Connector(
    name="webhook",
    label="Outgoing webhook",
    version="1.0.0",
    description="Signed JSON webhooks to other systems",
    actions=[webhook_send],
    credential_types=[WEBHOOK_SECRET],
    icon="send",
)
