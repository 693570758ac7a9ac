"""Credential types of an imported connector, and signing a request with one.

The fields each kind asks for are in :func:`credential_type`; OAuth2 authorization code
goes through the product's Connect flow (the token arrives as ``access_token``), and
OAuth2 client credentials (RFC 6749 §4.4) are exchanged here for a token, the client
authenticated with HTTP Basic (§2.3.1), cached per credential until 30 s before it expires.
"""

from __future__ import annotations

import base64
import time
from typing import Annotated, Any

import msgspec

from connectors import sdk

from .definition import CredentialSpec
from .requests import Request

TOKEN_MARGIN = 30.0
_tokens: dict[tuple[str, str, str], tuple[str, float]] = {}


class ApiKeyValue(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An API key; where it goes (header, query or cookie, and its name) the document says."""

    api_key: Annotated[str, sdk.secret("API key")]


class ClientCredentialsFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An OAuth2 client that gets its own tokens (client credentials grant)."""

    token_url: Annotated[str, msgspec.Meta(title="Token URL")]
    client_id: Annotated[str, msgspec.Meta(title="Client id")]
    client_secret: Annotated[str, sdk.secret("Client secret")]
    scope: Annotated[str, msgspec.Meta(title="Scopes", description="Space-separated")] = ""


def credential_type(spec: CredentialSpec) -> sdk.CredentialType:
    """The SDK credential type of ``spec`` (defaults from the document's URLs and scopes)."""
    scope = " ".join(spec.scopes)
    common: dict[str, Any] = {"label": spec.label, "description": spec.description[:200]}
    if spec.kind == "api_key":
        where = f"sent in the {spec.location} {spec.param_name}"
        return sdk.credential_type(
            spec.type,
            kind="api_key",
            fields=ApiKeyValue,
            label=spec.label,
            description=(spec.description[:150] + f" ({where})").strip(),
        )
    if spec.kind == "basic":
        return sdk.credential_type(spec.type, kind="basic", fields=sdk.BasicFields, **common)
    if spec.kind == "bearer":
        return sdk.credential_type(spec.type, kind="bearer", fields=sdk.BearerFields, **common)
    if spec.kind == "oauth2":
        defaults = {
            "authorize_url": spec.authorize_url,
            "token_url": spec.token_url,
            "scope": scope,
        }
        return sdk.credential_type(
            spec.type, kind="oauth2", fields=sdk.OAuth2Fields, defaults=defaults, **common
        )
    defaults = {"token_url": spec.token_url, "scope": scope}
    return sdk.credential_type(
        spec.type, kind="custom", fields=ClientCredentialsFields, defaults=defaults, **common
    )


async def sign(request: Request, spec: CredentialSpec, credential: dict[str, Any]) -> None:
    """Add what ``credential`` (of ``spec``'s type) proves to ``request``."""
    if spec.kind == "api_key":
        key = str(credential["api_key"])
        if spec.location == "query":
            request.params.append((spec.param_name, key))
        elif spec.location == "cookie":
            request.cookies[spec.param_name] = key
        else:
            request.headers[spec.param_name] = key
    elif spec.kind == "basic":
        pair = f"{credential['username']}:{credential['password']}".encode()
        request.headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    elif spec.kind == "bearer":
        request.headers["Authorization"] = f"Bearer {credential['token']}"
    elif spec.kind == "oauth2":
        kind = str(credential.get("token_type") or "Bearer")
        kind = "Bearer" if kind.lower() == "bearer" else kind
        request.headers["Authorization"] = f"{kind} {credential['access_token']}"
    else:
        token = await client_credentials_token(credential)
        request.headers["Authorization"] = f"Bearer {token}"


async def client_credentials_token(credential: dict[str, Any]) -> str:
    """An access token for an OAuth2 client-credentials credential (cached).

    Raises ``sdk.NonRetryableError`` (kind ``credential_refresh_failed``) when the token
    endpoint refuses the client, ``sdk.ActionError`` when it cannot be reached."""
    url = str(credential["token_url"])
    key = (str(credential.get("id", "")), url, str(credential["client_id"]))
    cached = _tokens.get(key)
    if cached is not None and cached[1] - TOKEN_MARGIN > time.time():
        return cached[0]
    form = {"grant_type": "client_credentials"}
    if credential.get("scope"):
        form["scope"] = str(credential["scope"])
    with sdk.http_errors(url, method="POST", service="OAuth2 token endpoint"):
        response = await sdk.http_client().post(
            url,
            data=form,
            auth=(str(credential["client_id"]), str(credential["client_secret"])),
            headers={"Accept": "application/json"},
        )
    if response.status_code >= 400:
        raise sdk.NonRetryableError(
            f"the OAuth2 token endpoint {url} refused the client (HTTP "
            f"{response.status_code}): check the client id and secret",
            kind="credential_refresh_failed",
        )
    try:
        body = response.json()
        token = str(body["access_token"])
    except (ValueError, KeyError, TypeError):
        raise sdk.NonRetryableError(
            f"the OAuth2 token endpoint {url} answered without an access_token",
            kind="credential_refresh_failed",
        ) from None
    lifetime = body.get("expires_in")
    expires = time.time() + (float(lifetime) if isinstance(lifetime, int | float) else 3600.0)
    _tokens[key] = (token, expires)
    return token
