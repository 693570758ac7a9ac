"""Helpers for verifying app webhook deliveries: HMAC signatures compared in constant time
and replay windows. Each failure raises :class:`~connectors.sdk.DeliveryRefused` (401)."""

from __future__ import annotations

import hashlib
import hmac

from .trigger_types import DeliveryRefused

__all__ = ["check_timestamp", "hmac_hex", "verify_hmac"]


def hmac_hex(secret: str | bytes, message: bytes, algorithm: str = "sha256") -> str:
    """Hex HMAC of ``message`` under ``secret`` (``algorithm``: a ``hashlib`` name)."""
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, message, getattr(hashlib, algorithm)).hexdigest()


def verify_hmac(
    secret: str | bytes,
    message: bytes,
    signature: str,
    *,
    algorithm: str = "sha256",
    prefix: str = "",
) -> None:
    """Check ``signature`` (``prefix`` + hex HMAC, e.g. Slack's ``"v0="``, GitHub's
    ``"sha256="``) in constant time; raises :class:`DeliveryRefused` (401,
    ``"signature"``) when it is missing or wrong."""
    if not signature:
        raise DeliveryRefused(401, "signature", "the delivery is not signed")
    expected = prefix + hmac_hex(secret, message, algorithm)
    if not hmac.compare_digest(expected.encode(), signature.strip().encode()):
        raise DeliveryRefused(401, "signature", "the signature does not match")


def check_timestamp(timestamp: str | float, now: float, tolerance: float = 300.0) -> None:
    """Refuse a delivery signed more than ``tolerance`` seconds from ``now`` (Unix
    seconds): :class:`DeliveryRefused` (401, ``"replay"``). Slack's window is 5 minutes
    (its "Verifying requests from Slack" guide)."""
    try:
        sent = float(timestamp)
    except (TypeError, ValueError):
        raise DeliveryRefused(401, "replay", "the delivery has no valid timestamp") from None
    if abs(now - sent) > tolerance:
        raise DeliveryRefused(401, "replay", "the delivery was signed outside the replay window")
