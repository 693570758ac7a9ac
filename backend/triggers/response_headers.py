"""What a workflow may put in a webhook answer's headers (Respond to Webhook step).

Webhook answers are served from Railyard's own origin, so a workflow author could
otherwise use them against the app's users. Rules (docs/security.md, "Security headers"):

- Headers that act on the origin rather than the answer are dropped: :data:`DROPPED`
  (``Set-Cookie`` could overwrite Railyard's session or CSRF cookie; ``Clear-Site-Data``
  could log users out; the security policies are Railyard's own and set for every
  ``/hooks/`` answer by :mod:`backend.web.security_headers`).
- A JavaScript content type is served as ``text/plain`` (with ``nosniff`` a browser then
  refuses to run the answer as a script or service worker of the app's origin).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DROPPED = frozenset(
    {
        "set-cookie",
        "clear-site-data",
        "content-security-policy",
        "content-security-policy-report-only",
        "x-content-type-options",
        "x-frame-options",
        "referrer-policy",
        "strict-transport-security",
        "service-worker-allowed",
        "cross-origin-opener-policy",
        "cross-origin-embedder-policy",
        "cross-origin-resource-policy",
        "permissions-policy",
    }
)
"""Lower-case names of the headers a webhook answer never carries from a workflow."""

_SCRIPT_TYPES = ("javascript", "ecmascript", "jscript", "livescript")


def answer_headers(headers: Mapping[str, Any]) -> dict[str, str]:
    """The workflow's answer headers with lower-cased names, minus :data:`DROPPED`."""
    out: dict[str, str] = {}
    for name, value in headers.items():
        key = str(name).strip().lower()
        if key and key not in DROPPED:
            out[key] = str(value)
    return out


def safe_media_type(media_type: str) -> str:
    """``media_type``, or ``text/plain; charset=utf-8`` for a script type."""
    essence = media_type.split(";")[0].strip().lower()
    if any(kind in essence for kind in _SCRIPT_TYPES):
        return "text/plain; charset=utf-8"
    return media_type
