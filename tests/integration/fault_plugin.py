"""The connector of the trigger fault tests, installed into the Railyard processes they
start as a tiny distribution (:func:`tests.integration.trigger_faults.install_fault_plugin`).

``faultkit.signed_event`` is an app webhook trigger the way vendors sign theirs: the
body is a JSON object with an ``id`` (the delivery's event id, kept across the vendor's
retries), signed with HMAC-SHA256 over ``<timestamp>.<body>`` under the config's
``secret`` (headers ``x-faultkit-timestamp`` and ``x-faultkit-signature``), refused
outside a 5-minute replay window.
"""

from __future__ import annotations

import time

import msgspec

from connectors import sdk

SIGNATURE = "x-faultkit-signature"
TIMESTAMP = "x-faultkit-timestamp"


class SignedConfig(msgspec.Struct, kw_only=True):
    """Config of ``faultkit.signed_event``: the signing secret the sender shares."""

    secret: str


def sign(secret: str, body: bytes, timestamp: float | None = None) -> dict[str, str]:
    """The headers a sender puts on ``body`` (what the trigger verifies)."""
    stamp = str(int(timestamp if timestamp is not None else time.time()))
    return {
        "content-type": "application/json",
        TIMESTAMP: stamp,
        SIGNATURE: sdk.hmac_hex(secret, stamp.encode() + b"." + body),
    }


@sdk.app_webhook_trigger(
    "faultkit.signed_event", label="Signed event", config=SignedConfig, response_deadline=3
)
async def signed_event(
    config: SignedConfig, request: sdk.PushRequest, registration: sdk.Registration | None
) -> sdk.PushResponse:
    """One event per signed delivery, its id the body's ``id``."""
    stamp = request.headers.get(TIMESTAMP, "")
    sdk.check_timestamp(stamp, request.received_at)
    message = stamp.encode() + b"." + request.body
    sdk.verify_hmac(config.secret, message, request.headers.get(SIGNATURE, ""))
    body = request.json()
    if not isinstance(body, dict) or not body.get("id"):
        raise sdk.DeliveryRefused(400, "malformed", "the body has no id")
    event = sdk.TriggerEvent(id=str(body["id"]), data=body, meta={"delivery_id": str(body["id"])})
    return sdk.PushResponse(events=[event])


connector = sdk.Connector(
    name="faultkit",
    label="Fault kit",
    version="0.1",
    description="Triggers of Railyard's own fault tests",
    triggers=[signed_event],
)
