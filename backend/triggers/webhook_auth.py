"""Webhook request authentication: none, header token, HTTP basic, HMAC signatures.

:func:`verify` raises :class:`AuthFailure` (HTTP 401, audited, no run) with a reason that
names what was wrong but never the expected value. Every comparison is constant-time
(``hmac.compare_digest``). The secret is the workflow's write-only webhook secret.

HMAC presets (the signed content and header of each service's documentation):

- ``github``: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(body)>``.
- ``slack``: ``X-Slack-Signature: v0=<hex HMAC-SHA256("v0:<ts>:<body>")>`` with
  ``X-Slack-Request-Timestamp: <ts>``.
- ``stripe``: ``Stripe-Signature: t=<ts>,v1=<hex HMAC-SHA256("<ts>.<body>")>`` (any ``v1``).
- ``shopify``: ``X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(body)>``.
- ``generic``: configured header, algorithm (sha1/sha256/sha512), encoding (hex/base64),
  prefix, and signed content (body, or ``"<ts>.<body>"`` with a timestamp header).

Timestamped schemes reject a timestamp further than ``tolerance`` seconds (default 300)
from the server's clock, which bounds replays.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

from backend.engine.nodes.trigger_webhook import WebhookConfig

_ALGORITHMS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512}


class AuthFailure(Exception):
    """The request failed the webhook's authentication; ``str()`` is the audited reason."""


def _eq(a: bytes | str, b: bytes | str) -> bool:
    a_bytes = a.encode() if isinstance(a, str) else a
    b_bytes = b.encode() if isinstance(b, str) else b
    return hmac.compare_digest(a_bytes, b_bytes)


def sign(secret: bytes, content: bytes, algorithm: str = "sha256") -> bytes:
    """Raw HMAC digest of ``content``."""
    return hmac.new(secret, content, _ALGORITHMS[algorithm]).digest()


def verify(
    config: WebhookConfig,
    secret: bytes | None,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
) -> None:
    """Check the request against the trigger ``config``; ``headers`` have lower-case names.

    ``now`` is the current Unix time in seconds. Raises :class:`AuthFailure`.
    """
    kind = config.auth
    if kind == "none":
        return
    if not secret:
        raise AuthFailure("the webhook requires authentication but has no secret configured")
    if kind == "header":
        name = config.token_header
        value = headers.get(name)
        if value is None:
            raise AuthFailure(f"missing {name} header")
        if not (_eq(value, secret) or _eq(value, b"Bearer " + secret)):
            raise AuthFailure(f"wrong token in {name} header")
        return
    if kind == "basic":
        _verify_basic(config.basic_user or "", secret, headers)
        return
    if kind == "hmac":
        _verify_hmac(config, secret, headers, body, now)
        return
    raise AuthFailure(f"unknown authentication kind {kind!r}")


def _verify_basic(user: str, secret: bytes, headers: Mapping[str, str]) -> None:
    value = headers.get("authorization", "")
    scheme, _, encoded = value.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        raise AuthFailure("missing basic credentials")
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise AuthFailure("malformed basic credentials") from exc
    got_user, sep, got_pass = decoded.partition(b":")
    ok_user = _eq(got_user, user.encode())
    ok_pass = _eq(got_pass, secret)
    if not (sep and ok_user and ok_pass):
        raise AuthFailure("wrong basic credentials")


def _timestamp(value: str | None, name: str, now: float, tolerance: float) -> str:
    if not value:
        raise AuthFailure(f"missing {name}")
    try:
        ts = int(value.strip())
    except ValueError as exc:
        raise AuthFailure(f"{name} is not a Unix timestamp") from exc
    if abs(now - ts) > tolerance:
        raise AuthFailure(f"{name} is outside the {int(tolerance)} s tolerance")
    return value.strip()


def _verify_hmac(
    config: WebhookConfig,
    secret: bytes,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
) -> None:
    preset = config.hmac_preset
    tolerance = float(config.tolerance)
    if preset == "github":
        got = headers.get("x-hub-signature-256")
        if not got:
            raise AuthFailure("missing X-Hub-Signature-256 header")
        if not _eq(got.strip(), "sha256=" + sign(secret, body).hex()):
            raise AuthFailure("X-Hub-Signature-256 does not match the body")
    elif preset == "slack":
        ts = _timestamp(
            headers.get("x-slack-request-timestamp"),
            "X-Slack-Request-Timestamp",
            now,
            tolerance,
        )
        got = headers.get("x-slack-signature")
        if not got:
            raise AuthFailure("missing X-Slack-Signature header")
        expected = "v0=" + sign(secret, b"v0:" + ts.encode() + b":" + body).hex()
        if not _eq(got.strip(), expected):
            raise AuthFailure("X-Slack-Signature does not match")
    elif preset == "stripe":
        _verify_stripe(secret, headers.get("stripe-signature"), body, now, tolerance)
    elif preset == "shopify":
        got = headers.get("x-shopify-hmac-sha256")
        if not got:
            raise AuthFailure("missing X-Shopify-Hmac-Sha256 header")
        if not _eq(got.strip(), base64.b64encode(sign(secret, body))):
            raise AuthFailure("X-Shopify-Hmac-Sha256 does not match the body")
    elif preset == "generic":
        _verify_generic(config, secret, headers, body, now, tolerance)
    else:
        raise AuthFailure(f"unknown signature scheme {preset!r}")


def _verify_stripe(
    secret: bytes, header: str | None, body: bytes, now: float, tolerance: float
) -> None:
    if not header:
        raise AuthFailure("missing Stripe-Signature header")
    ts: str | None = None
    candidates: list[str] = []
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        if key == "t":
            ts = value
        elif key == "v1":
            candidates.append(value)
    ts = _timestamp(ts, "Stripe-Signature timestamp", now, tolerance)
    if not candidates:
        raise AuthFailure("Stripe-Signature has no v1 signature")
    expected = sign(secret, ts.encode() + b"." + body).hex()
    matched = False
    for candidate in candidates:
        matched = _eq(candidate, expected) or matched
    if not matched:
        raise AuthFailure("Stripe-Signature does not match")


def _verify_generic(
    config: WebhookConfig,
    secret: bytes,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    tolerance: float,
) -> None:
    name = config.signature_header
    algorithm = config.hmac_algorithm
    if algorithm not in _ALGORITHMS:
        raise AuthFailure(f"unknown algorithm {algorithm!r}")
    content = body
    if config.hmac_signed == "timestamp_body":
        ts_name = config.timestamp_header
        ts = _timestamp(headers.get(ts_name), f"{ts_name} header", now, tolerance)
        content = ts.encode() + b"." + body
    got = headers.get(name)
    if not got:
        raise AuthFailure(f"missing {name} header")
    digest = sign(secret, content, algorithm)
    encoded = (
        base64.b64encode(digest).decode() if config.hmac_encoding == "base64" else digest.hex()
    )
    if not _eq(got.strip(), (config.hmac_prefix or "") + encoded):
        raise AuthFailure(f"{name} does not match")
