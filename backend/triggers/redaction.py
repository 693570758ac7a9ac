"""Which request headers of a webhook call are secret, and how they are redacted.

The rule (docs/security.md, "Secrets in run data"): a header is **secret** when its
lower-cased name is

1. always: ``authorization``, ``proxy-authorization``, ``cookie`` (so Railyard's own
   ``railyard_session`` and ``csrftoken`` cookies with it) and ``x-csrftoken`` (Railyard's
   CSRF header, a copy of the CSRF cookie);
2. a signature header of any HMAC scheme Railyard verifies, whichever auth the webhook
   uses (they are derived from a secret): ``x-hub-signature``, ``x-hub-signature-256``,
   ``x-slack-signature``, ``stripe-signature``, ``x-shopify-hmac-sha256``;
3. the header the webhook's own authentication reads: ``auth_header`` of header-token auth
   (default ``authorization``) and ``hmac_header`` of a generic HMAC signature;
4. listed in the ``RAILYARD_REDACT_HEADERS`` setting (comma-separated, every webhook);
5. listed in the Webhook node's ``redact_headers`` setting (comma-separated, that webhook).

A secret header keeps its name in the run input with the value :data:`REDACTED`, so a
workflow can still test that it was sent; the value itself is dropped before the run
input exists (nothing downstream: run, step records, attempts, events, test calls, pages
or APIs, ever holds it). :func:`auth_summary` tells the run that (and how) the request was
authenticated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from backend.engine.nodes.trigger_webhook import WebhookConfig

REDACTED = "[redacted]"
"""The value a secret header has in run data."""

ALWAYS_SECRET = frozenset({"authorization", "proxy-authorization", "cookie", "x-csrftoken"})
"""Headers that authenticate a caller to Railyard or to a browser session."""

SIGNATURE_HEADERS = frozenset(
    {
        "x-hub-signature",
        "x-hub-signature-256",
        "x-slack-signature",
        "stripe-signature",
        "x-shopify-hmac-sha256",
    }
)
"""Signature headers of the HMAC presets (secret-derived whatever the webhook's auth)."""


def split_names(text: str | Iterable[str] | None) -> frozenset[str]:
    """Header names from a comma-separated string (or an iterable of names), lower-cased."""
    if not text:
        return frozenset()
    items = text.split(",") if isinstance(text, str) else text
    return frozenset(n.strip().lower() for n in items if n and n.strip())


def secret_header_names(config: WebhookConfig, extra: Iterable[str] = ()) -> frozenset[str]:
    """Lower-cased names of the headers that are secret for a webhook with trigger ``config``.

    ``extra``: the names of the ``RAILYARD_REDACT_HEADERS`` setting. See the module
    docstring for the rule.
    """
    names = set(ALWAYS_SECRET | SIGNATURE_HEADERS)
    if config.auth == "header":
        names.add(config.token_header)
    if config.auth == "hmac" and config.hmac_preset == "generic":
        names.add(config.signature_header)
    names |= split_names(extra)
    names |= split_names(config.redact_headers)
    return frozenset(names)


def redact_headers(headers: Mapping[str, str], secret: frozenset[str]) -> dict[str, str]:
    """``headers`` (lower-case names) with the value of every name in ``secret`` replaced by
    :data:`REDACTED`."""
    return {k: (REDACTED if k in secret else v) for k, v in headers.items()}


def auth_summary(config: WebhookConfig) -> dict[str, Any]:
    """What the run may know about the request's authentication: ``{"kind", "verified"}``
    plus the HMAC ``scheme``, the basic-auth ``user`` or the token ``header`` name.

    Only called for requests that passed :func:`backend.triggers.webhook_auth.verify`, so
    ``verified`` is true whenever ``kind`` is not ``none``.
    """
    kind = config.auth
    summary: dict[str, Any] = {"kind": kind, "verified": kind != "none"}
    if kind == "hmac":
        summary["scheme"] = config.hmac_preset
    elif kind == "basic":
        summary["user"] = config.basic_user or ""
    elif kind == "header":
        summary["header"] = config.token_header
    return summary
