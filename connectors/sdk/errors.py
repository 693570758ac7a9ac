"""Errors an action raises, and how HTTP statuses map onto them.

The engine reads three things from an error: ``kind`` (a short machine name matched
against a step's ``non_retryable_error_kinds``), ``retryable`` and ``retry_after``
(seconds the remote asked us to wait; the engine waits at least that long before the next
attempt). Any other exception escaping an action is treated as a retryable error of kind
``"error"``.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

__all__ = [
    "ActionError",
    "ConfigError",
    "NonRetryableError",
    "http_errors",
    "parse_retry_after",
    "raise_for_status",
    "redact_url",
]


class ActionError(Exception):
    """A failed action call.

    Args:
        message: human-readable, shown in the run view.
        kind: short machine-readable class of error (``"http_503"``, ``"ssrf_blocked"``).
        retryable: ``False`` fails the step immediately, whatever its retry policy.
        retry_after: minimum delay before the next attempt, in seconds, or ``None``.
        details: extra JSON-able data recorded with the attempt.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "error",
        retryable: bool = True,
        retry_after: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after
        self.details = dict(details) if details else {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, kind={self.kind!r}, "
            f"retryable={self.retryable!r}, retry_after={self.retry_after!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: ``{"message", "kind", "retryable", "retry_after", "details"}``."""
        return {
            "message": self.message,
            "kind": self.kind,
            "retryable": self.retryable,
            "retry_after": self.retry_after,
            "details": self.details,
        }


class NonRetryableError(ActionError):
    """An error that retrying cannot fix (bad input, 4xx, blocked address)."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "error",
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, kind=kind, retryable=False, details=details)


class ConfigError(NonRetryableError):
    """The node's config does not match the action's Config type (kind ``"config"``)."""

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, kind="config", details=details)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Parse an HTTP ``Retry-After`` header (RFC 9110 §10.2.3) into seconds.

    Accepts delay-seconds (``"120"``) or an HTTP-date (``"Wed, 21 Oct 2015 07:28:00
    GMT"``); a date in the past gives ``0.0``. Returns ``None`` when absent or unparsable.
    ``now`` (epoch seconds) is for tests.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


_EXCERPT_CHARS = 200


def _excerpt(response: httpx.Response) -> str:
    try:
        text = response.text
    except (httpx.ResponseNotRead, UnicodeDecodeError, LookupError):
        return ""
    text = " ".join(text.split())
    if len(text) > _EXCERPT_CHARS:
        text = text[:_EXCERPT_CHARS] + "..."
    return text


def raise_for_status(response: httpx.Response, *, url: str | None = None) -> None:
    """Raise an :class:`ActionError` for a response with status >= 400; else return.

    - 429 and 503: retryable, ``retry_after`` from the ``Retry-After`` header (seconds or
      HTTP-date) when present;
    - other 5xx: retryable;
    - other 4xx: :class:`NonRetryableError`.

    ``kind`` is ``"http_<status>"``; the message names the status, the method and URL and a
    short excerpt of the body; ``details`` holds ``status`` and ``url``. ``url`` replaces
    the request URL in both (pass :func:`redact_url` of a URL that is itself a secret).
    """
    status = response.status_code
    if status < 400:
        return
    request = response._request
    shown = url if url is not None else (str(request.url) if request is not None else None)
    where = f" from {request.method} {shown}" if request is not None else ""
    reason = response.reason_phrase or ""
    excerpt = _excerpt(response)
    message = f"HTTP {status} {reason}".rstrip() + where
    if excerpt:
        message += f": {excerpt}"
    details: dict[str, Any] = {"status": status}
    if shown is not None:
        details["url"] = shown
    kind = f"http_{status}"
    if status in (429, 503):
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        raise ActionError(
            message, kind=kind, retryable=True, retry_after=retry_after, details=details
        )
    if status >= 500:
        raise ActionError(message, kind=kind, retryable=True, details=details)
    raise NonRetryableError(message, kind=kind, details=details)


def redact_url(url: str | httpx.URL) -> str:
    """``scheme://host[:port]/…``: a URL to show when its path or query is a secret
    (a Slack incoming-webhook URL, a signed link). Unparsable input gives ``"(URL)"``."""
    try:
        parsed = httpx.URL(str(url))
    except (httpx.InvalidURL, TypeError):
        return "(URL)"
    if not parsed.scheme or not parsed.host:
        return "(URL)"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}/…"


@contextmanager
def http_errors(
    url: str | httpx.URL,
    *,
    method: str = "",
    service: str = "",
    timeout: float | None = None,
) -> Iterator[None]:
    """Map httpx's network errors raised in the ``with`` block to retryable step errors.

    - ``httpx.TimeoutException`` -> :class:`ActionError` kind ``http_timeout``:
      ``"<service> <METHOD> <url> timed out after <timeout> s (ReadTimeout)"``;
    - any other ``httpx.TransportError`` (connection refused, DNS failure, protocol
      error) -> :class:`ActionError` kind ``http_transport``:
      ``"<service> <METHOD> <url> failed: ConnectError: ..."``.

    - ``httpx.UnsupportedProtocol`` (no or another scheme) -> :class:`NonRetryableError`
      kind ``http_invalid_url``.

    The first two are retryable; all carry ``details={"url": <url>}``. ``url`` is what the message
    shows: pass :func:`redact_url` of a URL that is itself a secret. ``timeout`` (seconds)
    is only quoted in the message. Anything else (HTTP statuses, the SSRF guard's own
    errors, ``httpx.InvalidURL``) passes through unchanged; use :func:`raise_for_status`
    on the response. Use it around the call::

        with sdk.http_errors(url, method="POST", service="Acme"):
            response = await sdk.http_client().post(url, json=body)
    """
    target = " ".join(part for part in (service, method, str(url)) if part)
    try:
        yield
    except httpx.TransportError as err:
        name = type(err).__name__
        if isinstance(err, httpx.UnsupportedProtocol):
            message, kind = f"{target}: not an http:// or https:// URL ({err})", "http_invalid_url"
        elif isinstance(err, httpx.TimeoutException):
            after = f" after {timeout:g} s" if timeout is not None else ""
            message, kind = f"{target} timed out{after} ({name})", "http_timeout"
        else:
            message, kind = f"{target} failed: {name}: {err}".rstrip(": "), "http_transport"
        error_class = NonRetryableError if kind == "http_invalid_url" else ActionError
        raise error_class(message, kind=kind, details={"url": str(url)}) from None
