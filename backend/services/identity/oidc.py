"""OpenID Connect single sign-on: the protocol half (discovery, JWKS, authorization code
with PKCE, id_token validation). Linking the verified claims to an account is
:mod:`backend.services.identity.sso`.

Flow (OpenID Connect Core 1.0, section 3.1 "Authentication using the Authorization Code
Flow", with PKCE, RFC 7636):

1. :func:`start` reads the provider's discovery document
   (``<issuer>/.well-known/openid-configuration``, OpenID Connect Discovery 1.0), stores a
   random ``state``, ``nonce`` and PKCE ``code_verifier`` (table ``oidc_logins``, single
   use, 10 minutes) and returns the provider's authorization URL (``S256`` challenge).
2. :func:`finish` takes the callback's ``state`` and ``code``, consumes the stored login,
   exchanges the code at the token endpoint (authlib, with the verifier and the client
   secret) and validates the id_token (:func:`validate_id_token`).

id_token checks (Core 1.0, 3.1.3.7): signature with a key of the provider's JWKS
(asymmetric algorithms only; an unknown ``kid`` refetches the JWKS once, for key
rotation), ``iss`` equal to the discovery document's issuer, ``aud`` containing the client
id (and ``azp`` equal to it when there are several audiences), ``exp`` in the future and
``iat`` present (60 s leeway for clock skew), ``sub`` present, ``nonce`` equal to the one
sent. Any failure raises :class:`OidcError` naming the check.

Discovery documents and JWKS are cached per process for an hour. Every request to the
provider (discovery, JWKS, token exchange) goes through the SSRF guard of outbound HTTP
(:func:`backend.services.outbound.guarded_transport`): a provider on a private address
must be allowed in ``RAILYARD_HTTP_ALLOWLIST``.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.oauth2.rfc6749.errors import OAuth2Error
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import OidcLogin
from backend.services import outbound
from backend.settings import Settings
from connectors import sdk

__all__ = [
    "OidcError",
    "callback_url",
    "finish",
    "provider_metadata",
    "start",
    "validate_id_token",
]

CACHE_SECONDS = 3600.0
LOGIN_TTL = timedelta(minutes=10)
LEEWAY_SECONDS = 60
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")


class OidcError(Exception):
    """A single sign-on that cannot go on: ``str(exc)`` says why (shown to the user);
    ``status`` is the HTTP status to answer (400 bad request, 401 refused token, 403
    refused account, 502 provider unreachable or broken)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Provider:
    metadata: dict[str, Any]
    fetched: float
    keys: KeySet | None = None
    keys_fetched: float = 0.0


_CACHE: dict[str, _Provider] = {}


def callback_url(settings: Settings) -> str:
    """The redirect URI to register at the provider: ``<base url>/login/oidc/callback``."""
    return f"{settings.base_url.rstrip('/')}/login/oidc/callback"


def _outbound(
    settings: Settings, transport: httpx.AsyncBaseTransport | None
) -> httpx.AsyncBaseTransport:
    """``transport``, or the SSRF-guarded one of the settings: every request to the
    identity provider (discovery, key set, token exchange) goes through the same guard as
    any outbound request (backend/services/outbound.py), since the issuer URL, and the
    ``jwks_uri`` and ``token_endpoint`` the provider names, are not Railyard's to trust."""
    return transport if transport is not None else outbound.guarded_transport(settings)


async def _get_json(
    settings: Settings, url: str, transport: httpx.AsyncBaseTransport | None
) -> dict[str, Any]:
    try:
        async with httpx.AsyncClient(transport=_outbound(settings, transport), timeout=10.0) as c:
            response = await c.get(url, headers={"Accept": "application/json"})
            response.raise_for_status()
            data = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise OidcError(f"the identity provider could not be read at {url}: {exc}", 502) from None
    except sdk.ActionError as exc:  # the SSRF guard refused the address, or DNS failed
        raise OidcError(f"the identity provider cannot be reached at {url}: {exc}", 502) from None
    if not isinstance(data, dict):
        raise OidcError(f"the identity provider answered {url} with no JSON object", 502)
    return data


async def provider_metadata(
    settings: Settings, transport: httpx.AsyncBaseTransport | None = None
) -> dict[str, Any]:
    """The provider's discovery document (cached for :data:`CACHE_SECONDS`).

    Raises :class:`OidcError` (502) when it cannot be read, its ``issuer`` differs from
    ``RAILYARD_OIDC_ISSUER`` (Discovery 1.0, 4.3) or an endpoint is missing.
    """
    issuer = settings.oidc_issuer.rstrip("/")
    cached = _CACHE.get(issuer)
    if cached is not None and time.monotonic() - cached.fetched < CACHE_SECONDS:
        return cached.metadata
    doc = await _get_json(settings, f"{issuer}/.well-known/openid-configuration", transport)
    if str(doc.get("issuer", "")).rstrip("/") != issuer:
        raise OidcError(
            f"the discovery document names issuer {doc.get('issuer')!r},"
            f" not the configured {settings.oidc_issuer!r}",
            502,
        )
    missing = [
        k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not doc.get(k)
    ]
    if missing:
        raise OidcError(f"the discovery document lacks {', '.join(missing)}", 502)
    _CACHE[issuer] = _Provider(metadata=doc, fetched=time.monotonic())
    return doc


async def _keys(
    settings: Settings,
    metadata: dict[str, Any],
    transport: httpx.AsyncBaseTransport | None,
    *,
    refresh: bool = False,
) -> KeySet:
    entry = _CACHE[settings.oidc_issuer.rstrip("/")]
    fresh = time.monotonic() - entry.keys_fetched < CACHE_SECONDS
    if entry.keys is not None and fresh and not refresh:
        return entry.keys
    document = await _get_json(settings, str(metadata["jwks_uri"]), transport)
    try:
        entry.keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise OidcError(f"the provider's JWKS cannot be read: {exc}", 502) from None
    entry.keys_fetched = time.monotonic()
    return entry.keys


def _oauth_client(settings: Settings, transport: httpx.AsyncBaseTransport | None) -> Any:
    return AsyncOAuth2Client(
        client_id=settings.oidc_client_id,
        client_secret=settings.oidc_client_secret or None,
        scope=settings.oidc_scopes,
        redirect_uri=callback_url(settings),
        code_challenge_method="S256",
        transport=_outbound(settings, transport),
        timeout=15.0,
    )


async def start(
    session: AsyncSession,
    settings: Settings,
    *,
    next_path: str,
    transport: httpx.AsyncBaseTransport | None = None,
) -> str:
    """Begin a sign-in: store state, nonce and PKCE verifier; return the URL to send the
    browser to. Raises :class:`OidcError` when SSO is off or the provider is unreadable."""
    if not settings.oidc_enabled:
        raise OidcError("single sign-on is not configured", 404)
    if "openid" not in settings.oidc_scopes.split():
        raise OidcError("RAILYARD_OIDC_SCOPES must include 'openid'", 500)
    metadata = await provider_metadata(settings, transport)
    state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
    verifier = verifier + secrets.token_urlsafe(16)  # RFC 7636: 43-128 characters
    client = _oauth_client(settings, transport)
    try:
        url, _ = client.create_authorization_url(
            metadata["authorization_endpoint"], state=state, code_verifier=verifier, nonce=nonce
        )
    finally:
        await client.aclose()
    now = datetime.now(UTC)
    await session.execute(delete(OidcLogin).where(OidcLogin.expires_at < now))
    session.add(
        OidcLogin(
            state=state,
            nonce=nonce,
            code_verifier=verifier,
            next_path=next_path[:2000],
            expires_at=now + LOGIN_TTL,
        )
    )
    await session.flush()
    return str(url)


async def finish(
    session: AsyncSession,
    settings: Settings,
    *,
    state: str,
    code: str,
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[dict[str, Any], str]:
    """Complete a sign-in: consume the stored login of ``state``, exchange ``code``,
    validate the id_token. Returns ``(verified claims, next path)``.

    Raises :class:`OidcError`: unknown, used or expired state (400), provider refused the
    code (401), provider unreachable (502), id_token refused (401).
    """
    if not settings.oidc_enabled:
        raise OidcError("single sign-on is not configured", 404)
    pending = (
        await session.execute(
            select(OidcLogin).where(OidcLogin.state == state[:100]).with_for_update()
        )
    ).scalar_one_or_none()
    if pending is None or pending.expires_at < datetime.now(UTC):
        raise OidcError("this sign-in expired or was already used; sign in again", 400)
    await session.delete(pending)
    await session.flush()
    metadata = await provider_metadata(settings, transport)
    client = _oauth_client(settings, transport)
    try:
        token = await client.fetch_token(
            metadata["token_endpoint"], code=code, code_verifier=pending.code_verifier
        )
    except (OAuth2Error, OAuthError) as exc:
        raise OidcError(f"the identity provider refused the sign-in: {exc}", 401) from None
    except (httpx.HTTPError, sdk.ActionError) as exc:
        raise OidcError(f"the identity provider could not be reached: {exc}", 502) from None
    finally:
        await client.aclose()
    id_token = token.get("id_token")
    if not isinstance(id_token, str):
        raise OidcError("the identity provider sent no id_token (is 'openid' allowed?)", 401)
    claims = await validate_id_token(
        settings, metadata, id_token, nonce=pending.nonce, transport=transport
    )
    return claims, pending.next_path


def _decode(id_token: str, keys: KeySet) -> Any:
    try:
        return jwt.decode(id_token, keys, algorithms=list(ALGORITHMS))
    except (ValueError, JoseError) as exc:
        raise OidcError(f"the id_token's signature is not valid: {exc}", 401) from None


async def validate_id_token(
    settings: Settings,
    metadata: dict[str, Any],
    id_token: str,
    *,
    nonce: str,
    transport: httpx.AsyncBaseTransport | None = None,
    now: int | None = None,
) -> dict[str, Any]:
    """Verify ``id_token`` (module docstring lists the checks); returns its claims.

    Raises :class:`OidcError` (401) naming the failed check.
    """
    try:
        token = _decode(id_token, await _keys(settings, metadata, transport))
    except OidcError:
        # the provider may have rotated its keys since they were cached: fetch them again
        token = _decode(id_token, await _keys(settings, metadata, transport, refresh=True))
    claims = dict(token.claims)
    registry = jwt.JWTClaimsRegistry(
        now=now,
        leeway=LEEWAY_SECONDS,
        iss={"essential": True, "value": metadata["issuer"]},
        aud={"essential": True, "value": settings.oidc_client_id},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
        nonce={"essential": True, "value": nonce},
    )
    try:
        registry.validate(claims)
    except JoseError as exc:
        raise OidcError(f"the id_token was refused: {exc}", 401) from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != settings.oidc_client_id:
        raise OidcError("the id_token was refused: azp is not this client", 401)
    return claims
