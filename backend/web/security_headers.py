"""Security headers on every HTTP response (pages, API, static files, webhooks).

Three policies (docs/security.md, "Security headers"):

- **App** (everything but ``/hooks/...`` and ``/catalog/icons/...``): :data:`APP_CSP`
  (scripts, styles, images and connections only from the app's own origin, no inline
  script or style, no plugins, no framing: ``frame-ancestors 'none'``), ``X-Frame-Options: DENY``,
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: same-origin``,
  ``Cross-Origin-Opener-Policy: same-origin``, and ``Strict-Transport-Security`` when
  Railyard is served over HTTPS (``RAILYARD_SECURE_COOKIES=1`` or an ``https://``
  ``RAILYARD_BASE_URL``).
- **Webhook answers** (``/hooks/...``, which may carry a Respond to Webhook step's body
  chosen by a workflow author): :data:`WEBHOOK_CSP` (``sandbox``: the document gets an
  opaque origin and runs no script, so HTML sent back by a workflow can neither read
  Railyard's cookies nor act as the app; ``default-src 'none'``: it loads nothing),
  ``nosniff`` and ``Referrer-Policy: no-referrer``. These replace any same-named header a
  workflow set.
- **Icons** (``/catalog/icons/...``, the Lucide sprite and the SVG icons plugins ship):
  :data:`ICON_CSP` (``sandbox``, ``default-src 'none'``: an icon opened on its own runs
  nothing and loads nothing; inline styles only, for the drawing itself), ``nosniff``,
  ``X-Frame-Options: DENY`` and ``Referrer-Policy: no-referrer``. The icons were sanitised
  when their plugin loaded (backend/services/connectors/icons.py); this is the second wall.

An app response to an authenticated request (a session or an API token found a user)
also gets ``Cache-Control: no-store``: what a signed-in user saw (runs, credentials,
audit rows) is kept by no browser or proxy cache, not even for the back button after
signing out.

The headers are set in one place (:class:`SecurityHeaders`, the app's ``before_send``
hook) so no route can forget them; a handler that sets one of them itself is overridden.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import Message, Scope

APP_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
"""The Content-Security-Policy of Railyard's own pages, API answers and static files."""

WEBHOOK_CSP = "sandbox; default-src 'none'; frame-ancestors 'none'"
"""The Content-Security-Policy of every answer under ``/hooks/``."""

ICON_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
"""The Content-Security-Policy of every answer under ``/catalog/icons/``."""

HSTS = "max-age=31536000; includeSubDomains"
"""Strict-Transport-Security when served over HTTPS (one year)."""

NO_STORE = "no-store"
"""Cache-Control of every app response to an authenticated request."""

WEBHOOK_PREFIX = "/hooks/"
ICON_PREFIX = "/catalog/icons/"


def _with_hsts(headers: dict[str, str], https: bool) -> dict[str, str]:
    """``headers`` plus Strict-Transport-Security when ``https``."""
    return {**headers, "strict-transport-security": HSTS} if https else headers


def app_headers(*, https: bool) -> dict[str, str]:
    """The headers of an app response (lower-case names); HSTS only when ``https``."""
    headers = {
        "content-security-policy": APP_CSP,
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "same-origin",
        "cross-origin-opener-policy": "same-origin",
    }
    return _with_hsts(headers, https)


def webhook_headers(*, https: bool) -> dict[str, str]:
    """The headers of an answer under ``/hooks/`` (lower-case names)."""
    headers = {
        "content-security-policy": WEBHOOK_CSP,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
    }
    return _with_hsts(headers, https)


def icon_headers(*, https: bool) -> dict[str, str]:
    """The headers of an icon answer under ``/catalog/icons/`` (lower-case names): those
    of a webhook answer with :data:`ICON_CSP` and no framing."""
    headers = webhook_headers(https=https)
    return {**headers, "content-security-policy": ICON_CSP, "x-frame-options": "DENY"}


def served_over_https(base_url: str, secure_cookies: bool) -> bool:
    """Whether Railyard is configured as served over HTTPS (then HSTS is sent)."""
    return secure_cookies or base_url.lower().startswith("https://")


def merge_headers(
    existing: list[tuple[bytes, bytes]], wanted: dict[str, str]
) -> list[tuple[bytes, bytes]]:
    """``existing`` ASGI headers minus any named in ``wanted``, plus ``wanted``."""
    return _merge(existing, *_encoded(wanted))


def _encoded(wanted: dict[str, str]) -> tuple[frozenset[bytes], list[tuple[bytes, bytes]]]:
    """``wanted`` as ASGI headers: (their lower-case names, the name/value pairs)."""
    pairs = [(k.encode(), v.encode("latin-1")) for k, v in wanted.items()]
    return frozenset(name.lower() for name, _ in pairs), pairs


def _merge(
    existing: list[tuple[bytes, bytes]], names: frozenset[bytes], pairs: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in existing if k.lower() not in names] + pairs


class SecurityHeaders:
    """A Litestar ``before_send`` hook setting the app or webhook security headers on every
    HTTP response start (module docstring).

    A hook rather than a middleware: Litestar runs ``before_send`` for every response the
    application sends, including the router's own 404/405 answers and static files. The
    headers are encoded once, here, not for every response.
    """

    def __init__(self, *, https: bool) -> None:
        self.app_headers = app_headers(https=https)
        self.webhook_headers = webhook_headers(https=https)
        self.icon_headers = icon_headers(https=https)
        self._app = _encoded(self.app_headers)
        self._app_signed_in = _encoded({**self.app_headers, "cache-control": NO_STORE})
        self._webhook = _encoded(self.webhook_headers)
        self._icon = _encoded(self.icon_headers)

    async def __call__(self, message: Message, scope: Scope) -> None:
        """Replace the security headers of an ``http.response.start`` message."""
        if message["type"] != "http.response.start" or scope["type"] != ScopeType.HTTP:
            return
        path = scope.get("path", "")
        if path.startswith(WEBHOOK_PREFIX):
            wanted = self._webhook
        elif path.startswith(ICON_PREFIX):
            wanted = self._icon
        elif scope.get("state", {}).get("user") is not None:  # authenticated: no cache
            wanted = self._app_signed_in
        else:
            wanted = self._app
        headers = _merge(list(message.get("headers", [])), *wanted)
        message["headers"] = headers  # type: ignore[typeddict-unknown-key]
