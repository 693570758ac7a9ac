"""Slack's Events API as a sender: signed event deliveries to a Request URL, with Slack's
retries, and the ``url_verification`` handshake.

Follows Slack's documentation ("Using the Slack Events API", "Verifying requests from
Slack"):

- each request is a JSON POST signed with the app's signing secret:
  ``X-Slack-Request-Timestamp: <unix seconds>`` and ``X-Slack-Signature: v0=<hex
  HMAC-SHA256 of "v0:<timestamp>:<raw body>">`` (a fresh timestamp per attempt);
- events travel in the ``event_callback`` envelope (``token``, ``team_id``,
  ``api_app_id``, ``event``, ``type``, ``authorizations``, ``event_id``,
  ``event_context``, ``event_time``);
- a delivery not answered with a 2xx status within 3 seconds (or not answered at all) is
  retried up to 3 times, with the same body and ``event_id`` and the headers
  ``X-Slack-Retry-Num`` (1, 2, 3) and ``X-Slack-Retry-Reason`` (``http_timeout``,
  ``connection_failed``, ``http_error``); Slack spaces its retries nearly immediately,
  after 1 minute and after 5 minutes (:data:`SLACK_RETRY_DELAYS`; tests pass shorter ones);
- saving a Request URL sends ``{"token", "challenge", "type": "url_verification"}``
  (signed) and accepts the URL when it answers 200 with the challenge as plain text, as
  ``{"challenge": ...}`` JSON, or form-encoded ``challenge=...``.

Usable from any test with an event loop::

    slack = SlackEvents("signing-secret", retry_delays=(0.0, 0.1, 0.1))
    await slack.verify_url(url)
    delivery = await slack.send_event(url, {"type": "message", "channel": "C1", ...})
    assert delivery.delivered and delivery.attempts[0].status == 200
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import string
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["Attempt", "Delivery", "SlackEvents", "UrlVerificationFailed"]

SLACK_TIMEOUT = 3.0
"""Seconds Slack waits for an answer."""

SLACK_RETRY_DELAYS = (0.0, 60.0, 300.0)
"""Slack's documented retry schedule: nearly immediately, after 1 minute, after 5."""


@dataclass
class Attempt:
    """One HTTP attempt of a delivery.

    Attributes:
        retry_num: 0 for the first attempt, then 1, 2, 3 (the ``X-Slack-Retry-Num`` sent).
        retry_reason: the ``X-Slack-Retry-Reason`` sent (``None`` on the first attempt).
        status: the HTTP status answered, ``None`` when there was no answer in time.
        failure: why the attempt failed (``http_timeout``, ``connection_failed``,
            ``http_error``), ``None`` when it succeeded.
        headers: the request headers sent.
        answer: the answer's body.
        elapsed: seconds until the answer (or the timeout).
    """

    retry_num: int
    retry_reason: str | None
    status: int | None
    failure: str | None
    headers: dict[str, str]
    answer: bytes = b""
    elapsed: float = 0.0


@dataclass
class Delivery:
    """One event delivered to a URL, with every attempt."""

    event_id: str
    body: bytes
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def delivered(self) -> bool:
        """Whether an attempt was answered with a 2xx status in time."""
        return any(a.failure is None for a in self.attempts)


class UrlVerificationFailed(AssertionError):
    """The Request URL did not answer the ``url_verification`` handshake as Slack
    requires (Slack then refuses to save it)."""


def _random_id(prefix: str, length: int = 10) -> str:
    alphabet = string.ascii_uppercase + string.digits
    return prefix + "".join(secrets.choice(alphabet) for _ in range(length))


class SlackEvents:
    """Sends Slack Events API requests to a Request URL.

    Args:
        signing_secret: the app's signing secret (what the ``slack.app`` credential holds).
        team_id, api_app_id: the workspace and app ids put in every envelope.
        timeout: seconds to wait for each answer (Slack: 3).
        retry_delays: seconds to wait before retries 1, 2 and 3 (Slack: 0, 60, 300).
        clock: Unix time in seconds, for the signature timestamp and ``event_time``
            (override to send stale, i.e. replayed, deliveries).
        client: an ``httpx.AsyncClient`` to send with (default: a new one per call).
    """

    def __init__(
        self,
        signing_secret: str,
        *,
        team_id: str = "T123ABC456",
        api_app_id: str = "A123ABC456",
        timeout: float = SLACK_TIMEOUT,
        retry_delays: Sequence[float] = SLACK_RETRY_DELAYS,
        clock: Callable[[], float] = time.time,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.signing_secret = signing_secret
        self.team_id = team_id
        self.api_app_id = api_app_id
        self.timeout = timeout
        self.retry_delays = tuple(retry_delays)
        self.clock = clock
        self.client = client
        self.deliveries: list[Delivery] = []

    def envelope(
        self, event: dict[str, Any], *, event_id: str | None = None, event_time: int | None = None
    ) -> dict[str, Any]:
        """The ``event_callback`` envelope Slack wraps ``event`` in."""
        return {
            "token": "XXYYZZ",
            "team_id": self.team_id,
            "api_app_id": self.api_app_id,
            "event": event,
            "type": "event_callback",
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": "U0RAILYARD",
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "event_id": event_id or _random_id("Ev"),
            "event_context": _random_id("EC", 20),
            "event_time": int(self.clock()) if event_time is None else event_time,
        }

    def signed_headers(self, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
        """The headers of a request carrying ``body``, signed at ``timestamp`` (now)."""
        sent = str(int(self.clock()) if timestamp is None else timestamp)
        digest = hmac.new(
            self.signing_secret.encode(), b"v0:" + sent.encode() + b":" + body, hashlib.sha256
        ).hexdigest()
        return {
            "Content-Type": "application/json",
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            "X-Slack-Request-Timestamp": sent,
            "X-Slack-Signature": f"v0={digest}",
        }

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        if self.client is not None:
            return await self.client.post(url, content=body, headers=headers)
        async with httpx.AsyncClient(follow_redirects=False) as client:
            return await client.post(url, content=body, headers=headers)

    async def _attempt(self, url: str, body: bytes, retry_num: int, reason: str | None) -> Attempt:
        headers = self.signed_headers(body)
        if retry_num:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = reason or "unknown_error"
        started = time.monotonic()
        try:
            response = await asyncio.wait_for(self._post(url, body, headers), self.timeout)
        except TimeoutError:
            failure, status, answer = "http_timeout", None, b""
        except httpx.TransportError:
            failure, status, answer = "connection_failed", None, b""
        else:
            status, answer = response.status_code, response.content
            failure = None if 200 <= status < 300 else "http_error"
        return Attempt(
            retry_num=retry_num,
            retry_reason=reason if retry_num else None,
            status=status,
            failure=failure,
            headers=headers,
            answer=answer,
            elapsed=time.monotonic() - started,
        )

    async def send_envelope(self, url: str, envelope: dict[str, Any]) -> Delivery:
        """Deliver ``envelope`` (any Events API body) to ``url`` with Slack's retries;
        returns the :class:`Delivery` (also appended to :attr:`deliveries`)."""
        body = json.dumps(envelope).encode()
        delivery = Delivery(event_id=str(envelope.get("event_id", "")), body=body)
        self.deliveries.append(delivery)
        reason: str | None = None
        for retry_num in range(len(self.retry_delays) + 1):
            if retry_num:
                await asyncio.sleep(self.retry_delays[retry_num - 1])
            attempt = await self._attempt(url, body, retry_num, reason)
            delivery.attempts.append(attempt)
            if attempt.failure is None:
                break
            reason = attempt.failure
        return delivery

    async def send_event(
        self, url: str, event: dict[str, Any], *, event_id: str | None = None
    ) -> Delivery:
        """Deliver ``event`` (e.g. ``{"type": "message", ...}``) in an ``event_callback``
        envelope to ``url``, retrying as Slack does."""
        return await self.send_envelope(url, self.envelope(event, event_id=event_id))

    async def verify_url(self, url: str) -> str:
        """Perform the ``url_verification`` handshake against ``url``; returns the
        challenge it echoed, or raises :class:`UrlVerificationFailed` saying why Slack
        would refuse the URL (no retries: Slack shows the error at once)."""
        challenge = secrets.token_urlsafe(36)
        handshake = {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge}
        body = json.dumps({**handshake, "type": "url_verification"}).encode()
        attempt = await self._attempt(url, body, 0, None)
        if attempt.status is None:
            raise UrlVerificationFailed(
                f"Your URL didn't respond in time ({attempt.failure}) to the url_verification "
                "request"
            )
        if attempt.status != 200:
            raise UrlVerificationFailed(
                f"Your request URL responded with an HTTP error: {attempt.status}"
            )
        if _echoed(attempt.answer) != challenge:
            raise UrlVerificationFailed(
                "Your URL didn't respond with the value of the challenge parameter: "
                f"{attempt.answer[:200]!r}"
            )
        return challenge


def _echoed(answer: bytes) -> str | None:
    """The challenge in an answer: plain text, JSON ``{"challenge"}`` or form-encoded."""
    text = answer.decode("utf-8", "replace").strip()
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        value = decoded.get("challenge")
        return value if isinstance(value, str) else None
    if isinstance(decoded, str):
        return decoded
    if text.startswith("challenge="):
        return urllib.parse.parse_qs(text).get("challenge", [""])[0]
    return text
