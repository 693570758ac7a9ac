"""What the messaging connectors (Teams, Discord, Telegram, Twilio) share: one guarded
POST, and turning a service's error answer into a step error.

Every service answers too many requests with HTTP 429 and a wait (``Retry-After`` in
seconds, or a ``retry_after`` in its JSON body, Discord's and Telegram's): that is a
retryable step error whose ``retry_after`` the retry policy waits (the longer of the
header and the body). 5xx answers are retryable, every other 4xx is not. The error kind
is ``<service>_<code>`` with the service's own error code when it gives one (Discord's
``code``, Telegram's ``error_code``, Twilio's ``code``), else ``<service>_http_<status>``.
"""

from __future__ import annotations

from typing import Any

import httpx

from connectors import sdk

__all__ = ["body_of", "post", "service_error"]


async def post(service: str, url: str, shown_url: str, **kwargs: Any) -> httpx.Response:
    """POST through the SDK's guarded client; network failures become step errors
    (``http_timeout``, ``http_transport``) naming ``service`` and ``shown_url``."""
    with sdk.http_errors(shown_url, method="POST", service=service):
        return await sdk.http_client().post(url, **kwargs)


def body_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of ``response`` (``{}`` when it is not one)."""
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def service_error(
    service: str,
    response: httpx.Response,
    *,
    code: Any = None,
    message: str = "",
    retry_after: float | None = None,
) -> sdk.ActionError:
    """The step error for an error answer of ``service`` (see the module docstring).

    ``code`` and ``message`` are the service's own; ``retry_after`` a wait its body
    gives (seconds)."""
    status = response.status_code
    prefix = service.lower().replace(" ", "_")
    kind = f"{prefix}_{code}" if code not in (None, "", 0) else f"{prefix}_http_{status}"
    text = message or response.text[:200] or response.reason_phrase
    details: dict[str, Any] = {"status": status, "code": code}
    full = f"{service} answered {status}: {text}"
    if status == 429 or status >= 500:
        header = sdk.parse_retry_after(response.headers.get("retry-after"))
        waits = [w for w in (header, retry_after) if w is not None]
        return sdk.ActionError(
            full, kind=kind, retry_after=max(waits) if waits else None, details=details
        )
    return sdk.NonRetryableError(full, kind=kind, details=details)
