"""Outbound HTTP the product itself makes (not a connector's): the SSRF policy of the
settings and the guarded transport every such request goes through (OAuth2 token
refreshes, single sign-on discovery, key sets and token exchange).

The policy is the one connectors get (docs/connectors.md, "Outbound HTTP"): private,
loopback and link-local addresses are refused unless ``RAILYARD_HTTP_ALLOW_PRIVATE`` is on
or the host is in ``RAILYARD_HTTP_ALLOWLIST``.
"""

from __future__ import annotations

import httpx

from backend.settings import Settings
from connectors.host.outbound import SsrfGuardTransport
from connectors.sdk import SsrfPolicy


def ssrf_policy(settings: Settings) -> SsrfPolicy:
    """The outbound-HTTP SSRF policy from settings."""
    return SsrfPolicy(
        allow_private=settings.http_allow_private, allowlist=tuple(settings.http_allowlist)
    )


def guarded_transport(settings: Settings) -> httpx.AsyncBaseTransport:
    """A new ``httpx`` transport enforcing :func:`ssrf_policy` (checked before the request
    and again at connect time) and the default response size cap; close it after use."""
    return SsrfGuardTransport(ssrf_policy(settings))
