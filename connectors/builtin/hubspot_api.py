"""Calling HubSpot's API from the HubSpot actions and triggers: base URL, auth, and
HubSpot's error bodies mapped to step errors.

Base URL: setting ``hubspot.api_url`` (``RAILYARD_HUBSPOT_API_URL``, default
``https://api.hubapi.com``). Auth: ``Authorization: Bearer <token>`` from the node's
``credential`` field (a ``hubspot.private_app`` token or ``hubspot.oauth2`` tokens).

Errors: HubSpot's error bodies ``{"status": "error", "message", "correlationId",
"category"}`` become step errors of kind ``hubspot_<category lower-cased>`` (e.g.
``hubspot_validation_error``, ``hubspot_object_not_found``); a rate-limit body, which
names ``errorType`` (``RATE_LIMIT``) and ``policyName`` instead of ``category`` (HubSpot's
"API usage guidelines"), gives ``hubspot_rate_limit``. The message carries HubSpot's
message and correlation id. 5xx are retryable, other 4xx are not, and 429 is retryable
after :func:`rate_limit_wait`.
"""

from __future__ import annotations

from typing import Annotated, Any

import httpx

from connectors import sdk

__all__ = [
    "DEFAULT_API_URL",
    "CredentialField",
    "call",
    "raise_hubspot_error",
    "rate_limit_wait",
    "request",
]

DEFAULT_API_URL = "https://api.hubapi.com"

CredentialField = Annotated[
    str,
    sdk.credential_meta("hubspot.private_app", "hubspot.oauth2", title="HubSpot account"),
]
"""The ``credential`` config field of every HubSpot node type."""

POLICY_WAITS = {"SECONDLY": 1.0, "TEN_SECONDLY_ROLLING": 10.0, "DAILY": 3600.0}
"""Seconds to wait per rate-limit policy HubSpot names in a 429 body: its secondly and
ten-secondly windows; the daily limit resets at midnight in the account's time zone,
which the answer does not give, so an hour."""


def rate_limit_wait(response: httpx.Response, body: dict[str, Any] | None = None) -> float:
    """Seconds to wait after HubSpot's 429 ``response`` (``body``: its decoded JSON):
    ``Retry-After`` when sent; else the wait of the ``policyName`` in the body
    (:data:`POLICY_WAITS`); else 1 s when ``X-HubSpot-RateLimit-Secondly-Remaining`` is
    0; else the ``X-HubSpot-RateLimit-Interval-Milliseconds`` window when
    ``X-HubSpot-RateLimit-Remaining`` is 0; else 10 s."""
    retry_after = sdk.parse_retry_after(response.headers.get("retry-after"))
    if retry_after is not None:
        return retry_after
    policy = str((body or {}).get("policyName") or "").upper()
    if policy in POLICY_WAITS:
        return POLICY_WAITS[policy]
    if response.headers.get("x-hubspot-ratelimit-secondly-remaining") == "0":
        return 1.0
    remaining = response.headers.get("x-hubspot-ratelimit-remaining")
    interval = response.headers.get("x-hubspot-ratelimit-interval-milliseconds")
    if remaining == "0" and interval and interval.isdigit():
        return int(interval) / 1000.0
    return 10.0


def raise_hubspot_error(response: httpx.Response, what: str) -> None:
    """Raise the step error for HubSpot's error ``response`` to ``what`` (e.g. ``"search
    contacts"``): :class:`sdk.ActionError` (429 with ``retry_after``, 5xx) or
    :class:`sdk.NonRetryableError` (other 4xx)."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    category = str(body.get("category") or body.get("errorType") or f"http_{response.status_code}")
    message = str(body.get("message") or response.reason_phrase or "error")
    correlation = body.get("correlationId")
    text = f"HubSpot {what} failed ({response.status_code} {category}): {message}"
    if correlation:
        text += f" [correlationId {correlation}]"
    details = {"status": response.status_code, "category": category, "correlationId": correlation}
    kind = "hubspot_" + category.lower()
    status = response.status_code
    if status == 429:
        wait = rate_limit_wait(response, body)
        raise sdk.ActionError(text, kind=kind, retry_after=wait, details=details)
    if status >= 500:
        raise sdk.ActionError(text, kind=kind, details=details)
    raise sdk.NonRetryableError(text, kind=kind, details=details)


async def request(method: str, path: str, what: str, body: Any = None) -> httpx.Response:
    """Send ``method path`` with the node's credential; returns the 2xx/3xx response or
    raises the step error (:func:`raise_hubspot_error`; network errors through
    ``sdk.http_errors``)."""
    cred = sdk.credential("credential")
    token = cred.get("access_token") or cred.get("token")
    base = str(sdk.setting("hubspot.api_url", DEFAULT_API_URL)).rstrip("/")
    with sdk.http_errors(base + path, method=method, service=f"HubSpot {what}:"):
        response = await sdk.http_client().request(
            method,
            base + path,
            json=body,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )
    if response.status_code >= 400:
        raise_hubspot_error(response, what)
    return response


async def call(method: str, path: str, what: str, body: Any = None) -> Any:
    """:func:`request`, returning the decoded JSON body (``None`` when empty)."""
    response = await request(method, path, what, body)
    return response.json() if response.content else None
