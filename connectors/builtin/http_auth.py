"""The HTTP connector's authentication: the generic credential types (API key, basic,
bearer, OAuth2) and how a request carries them; shared by ``http.request``,
``http.new_items`` and the feed trigger."""

from __future__ import annotations

import base64
from typing import Annotated, Any

from connectors import sdk

__all__ = [
    "API_KEY",
    "AUTH_TYPES",
    "BASIC",
    "BEARER",
    "OAUTH2",
    "AuthCredential",
    "apply_auth",
    "query_params",
]

API_KEY = sdk.credential_type(
    "api_key",
    label="API key",
    kind="api_key",
    fields=sdk.ApiKeyFields,
    description="A key sent in a header or query parameter",
)
BASIC = sdk.credential_type(
    "basic",
    label="Basic auth",
    kind="basic",
    fields=sdk.BasicFields,
    description="Username and password (HTTP Basic)",
)
BEARER = sdk.credential_type(
    "bearer",
    label="Bearer token",
    kind="bearer",
    fields=sdk.BearerFields,
    description="Authorization: Bearer <token>",
)
OAUTH2 = sdk.credential_type(
    "oauth2",
    label="OAuth2 (authorization code)",
    kind="oauth2",
    fields=sdk.OAuth2Fields,
    description="Any OAuth2 provider; click Connect after saving",
)
AUTH_TYPES = ("basic", "bearer", "api_key", "oauth2")


def apply_auth(
    credential: dict[str, Any], headers: dict[str, str], params: list[tuple[str, str]]
) -> None:
    """Add the credential's auth to ``headers`` / ``params`` (in place) by its ``kind``."""
    kind = credential.get("kind")
    if kind == "basic":
        raw = f"{credential['username']}:{credential['password']}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
    elif kind == "bearer":
        headers["Authorization"] = f"Bearer {credential['token']}"
    elif kind == "oauth2":
        headers["Authorization"] = f"Bearer {credential['access_token']}"
    elif kind == "api_key":
        if credential.get("placement") == "query":
            params.append((credential.get("name") or "api_key", credential["api_key"]))
        else:
            headers[credential.get("name") or "X-API-Key"] = credential["api_key"]
    else:
        raise sdk.ConfigError(f"credential kind {kind!r} cannot authenticate HTTP requests")


def query_params(query: dict[str, str | list[str]]) -> list[tuple[str, str]]:
    """Query parameters as pairs; a list value repeats its key."""
    params: list[tuple[str, str]] = []
    for key, value in query.items():
        for item in value if isinstance(value, list) else [value]:
            params.append((key, str(item)))
    return params


AuthCredential = Annotated[str | None, sdk.credential_meta(*AUTH_TYPES, title="Authentication")]
"""A config field: an optional credential of one of :data:`AUTH_TYPES` (see
:func:`apply_auth`)."""
