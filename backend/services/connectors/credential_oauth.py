"""OAuth2 credentials: the authorization-code flow with PKCE, and token refresh.

:func:`start_oauth` stores a single-use ``state`` with a PKCE verifier (S256) and returns
the provider's authorization URL; :func:`finish_oauth` exchanges the code (authlib) and
stores the tokens encrypted; :func:`refresh_token` renews an access token (used by
:func:`backend.services.connectors.credential_use.resolve_for_action`). Rules: docs/credentials.md.
"""

from __future__ import annotations

import secrets
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.oauth2.rfc6749.errors import OAuth2Error
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.crypto import Keyring
from backend.db.models.credentials import Credential, OAuthState
from backend.services import audit
from backend.services.connectors.credentials import (
    CredentialError,
    CredentialNotFound,
    CredentialView,
    NotOAuth2,
    load_row,
    open_payload,
    seal_payload,
    view_of,
)
from connectors import sdk

OAUTH_STATE_TTL = 600.0
"""Seconds a pending OAuth2 authorization stays valid."""


def _oauth_client(
    fields: dict[str, Any], transport: httpx.AsyncBaseTransport | None, **kwargs: Any
) -> AsyncOAuth2Client:
    return AsyncOAuth2Client(
        client_id=fields["client_id"],
        client_secret=fields["client_secret"],
        scope=fields.get("scope") or None,
        code_challenge_method="S256",
        transport=transport,
        timeout=30.0,
        trust_env=False,
        **kwargs,
    )


async def start_oauth(
    session: AsyncSession,
    catalog: Any,
    keyring: Keyring,
    credential_id: str | uuid.UUID,
    *,
    redirect_uri: str,
    user_id: uuid.UUID | None,
) -> str:
    """Begin the authorization-code flow: returns the provider URL to redirect the browser to.

    Raises :class:`CredentialNotFound` and :class:`NotOAuth2`.
    """
    row = await load_row(session, credential_id)
    if row.kind != "oauth2":
        raise NotOAuth2(f"credential {row.name!r} is not an OAuth2 credential")
    fields = open_payload(keyring, row)["fields"]
    verifier = secrets.token_urlsafe(48)
    state = secrets.token_urlsafe(32)
    client = _oauth_client(fields, None, redirect_uri=redirect_uri)
    try:
        url, _ = client.create_authorization_url(
            fields["authorize_url"], state=state, code_verifier=verifier
        )
    finally:
        await client.aclose()
    now = datetime.now(UTC)
    await session.execute(delete(OAuthState).where(OAuthState.expires_at < now))
    session.add(
        OAuthState(
            state=state,
            credential_id=row.id,
            user_id=user_id,
            code_verifier=verifier,
            redirect_uri=redirect_uri,
            expires_at=now + timedelta(seconds=OAUTH_STATE_TTL),
        )
    )
    await audit.record(
        session, "credential.oauth_start", "credential", str(row.id), actor_user_id=user_id
    )
    await session.flush()
    return str(url)


def _token_record(token: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    expires_at = token.get("expires_at")
    if expires_at is None and token.get("expires_in") is not None:
        expires_at = time.time() + float(token["expires_in"])
    refresh = token.get("refresh_token") or (previous or {}).get("refresh_token")
    return {
        "access_token": token["access_token"],
        "token_type": token.get("token_type", "Bearer"),
        "refresh_token": refresh,
        "expires_at": float(expires_at) if expires_at is not None else None,
        "scope": token.get("scope", ""),
    }


def _store_token(
    keyring: Keyring, row: Credential, fields: dict[str, Any], token: dict[str, Any]
) -> None:
    row.ciphertext = seal_payload(keyring, row.id, {"fields": fields, "token": token})
    row.key_id = keyring.current_id
    row.public = {**(row.public or {}), "_connected": True}
    expires = token.get("expires_at")
    row.token_expires_at = datetime.fromtimestamp(expires, UTC) if expires else None
    row.updated_at = datetime.now(UTC)


async def finish_oauth(
    session: AsyncSession,
    catalog: Any,
    keyring: Keyring,
    *,
    state: str,
    code: str,
    user_id: uuid.UUID | None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> CredentialView:
    """Complete the flow: check ``state`` (single use, unexpired, same user), exchange
    ``code`` at the token endpoint, store the tokens encrypted; audit ``credential.connect``.

    ``transport`` carries the token request (the app passes the SSRF-guarded transport).
    Raises :class:`CredentialNotFound` (unknown/expired state) or :class:`CredentialError`
    (the provider refused the code).
    """
    pending = (
        await session.execute(select(OAuthState).where(OAuthState.state == state).with_for_update())
    ).scalar_one_or_none()
    if pending is None or pending.expires_at < datetime.now(UTC):
        raise CredentialNotFound("unknown or expired OAuth2 state; start Connect again")
    if pending.user_id is not None and user_id is not None and pending.user_id != user_id:
        raise CredentialNotFound("this OAuth2 authorization was started by another user")
    await session.delete(pending)
    row = await load_row(session, pending.credential_id, lock=True)
    fields = open_payload(keyring, row)["fields"]
    client = _oauth_client(fields, transport, redirect_uri=pending.redirect_uri)
    try:
        token = await client.fetch_token(
            fields["token_url"], code=code, code_verifier=pending.code_verifier
        )
    except (OAuth2Error, OAuthError, httpx.HTTPError, sdk.ActionError) as err:
        raise CredentialError(f"the provider refused the authorization code: {err}") from None
    finally:
        await client.aclose()
    _store_token(keyring, row, fields, _token_record(dict(token), None))
    await audit.record(
        session, "credential.connect", "credential", str(row.id), actor_user_id=user_id
    )
    await session.flush()
    return view_of(catalog, row)


async def refresh_token(
    keyring: Keyring,
    row: Credential,
    fields: dict[str, Any],
    token: dict[str, Any],
    transport: httpx.AsyncBaseTransport | None,
) -> dict[str, Any]:
    if not token.get("refresh_token"):
        raise sdk.NonRetryableError(
            f"the access token of credential {row.name!r} expired and there is no refresh "
            "token: connect it again on the credentials page",
            kind="credential_expired",
        )
    client = _oauth_client(fields, transport)
    try:
        fresh = await client.refresh_token(
            fields["token_url"], refresh_token=token["refresh_token"]
        )
    except (OAuth2Error, OAuthError) as err:
        raise sdk.NonRetryableError(
            f"refreshing credential {row.name!r} failed ({err.error}): connect it again",
            kind="credential_refresh_failed",
        ) from None
    except httpx.HTTPError as err:
        raise sdk.ActionError(
            f"refreshing credential {row.name!r} failed: {type(err).__name__}: {err}",
            kind="credential_refresh_failed",
        ) from None
    finally:
        await client.aclose()
    record = _token_record(dict(fresh), token)
    _store_token(keyring, row, fields, record)
    return record
