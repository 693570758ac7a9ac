"""Credentials: create, list (masked), update, delete, resolve for actions, rotate keys,
and the OAuth2 authorization-code flow.

Rules (see docs/credentials.md):

- A credential has a connector-declared type (``catalog.credential_type(name)``); its
  fields are validated against the type and stored encrypted (:mod:`backend.crypto`,
  associated data ``b"credential:<id>"``). The plaintext JSON is
  ``{"fields": {...}, "token": {...} | null}``.
- Nothing here returns a secret to a caller except :func:`resolve_for_action`, which the
  engine calls right before an action runs. Views carry ``public``: non-secret fields and
  masked hints of secret ones (``"••••1234"`` for secrets of 16+ characters, else
  ``"••••"``).
- Updating with a secret field missing or empty keeps the stored secret (write-only fields).
- Every create, update, delete, connect and use writes an :class:`AuditLog` row in the same
  transaction.
- OAuth2 (``kind == "oauth2"``): :func:`start_oauth` stores a single-use ``state`` with a
  PKCE verifier (S256) and returns the provider's authorization URL; :func:`finish_oauth`
  exchanges the code (authlib) and stores the tokens encrypted; :func:`resolve_for_action`
  refreshes the access token when it expires within ``refresh_margin`` seconds, holding
  the credential row lock so concurrent actions refresh once.
"""

from __future__ import annotations

import secrets
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgspec
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.oauth2.rfc6749.errors import OAuth2Error
from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.crypto import CryptoError, Keyring
from backend.db.models.credentials import Credential, OAuthState
from backend.services import audit, grants, references
from connectors import sdk

__all__ = [
    "CredentialError",
    "CredentialNotFound",
    "CredentialView",
    "create_credential",
    "delete_credential",
    "finish_oauth",
    "get_credential",
    "list_credentials",
    "mask_secret",
    "resolve_for_action",
    "rotate_keys",
    "start_oauth",
    "update_credential",
]

OAUTH_STATE_TTL = 600.0
"""Seconds a pending OAuth2 authorization stays valid."""


class CredentialError(ValueError):
    """Invalid credential input; ``field`` names the offending field when known."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class CredentialNotFound(LookupError):
    """No credential (or pending OAuth2 state) with that id."""


class CredentialView(msgspec.Struct):
    """What may be shown about a credential (also the API's wire type): never a secret.

    ``public`` maps every field of the type to its value (non-secret) or a masked hint
    (secret, ``""`` when unset); ``connected`` tells whether an OAuth2 credential holds
    tokens; ``token_expires_at`` is when its access token expires (ISO 8601).
    """

    id: str
    name: str
    type: str
    kind: str
    type_label: str
    public: dict[str, Any]
    secret_fields: list[str]
    connected: bool
    token_expires_at: str | None
    created_at: str
    updated_at: str
    created_by: str | None = None


def mask_secret(value: Any) -> str:
    """Masked hint of a secret: ``""`` when unset, ``"••••"`` + last 4 chars for 16+
    characters, else ``"••••"``."""
    if value in (None, ""):
        return ""
    text = str(value)
    return "••••" + text[-4:] if len(text) >= 16 else "••••"


def _aad(credential_id: uuid.UUID) -> bytes:
    return f"credential:{credential_id}".encode()


def _seal(keyring: Keyring, credential_id: uuid.UUID, payload: dict[str, Any]) -> bytes:
    return keyring.encrypt(msgspec.json.encode(payload), aad=_aad(credential_id))


def _open(keyring: Keyring, row: Credential) -> dict[str, Any]:
    plain = keyring.decrypt(row.ciphertext, aad=_aad(row.id))
    payload: dict[str, Any] = msgspec.json.decode(plain)
    return payload


def _ctype(catalog: Any, type_name: str) -> Any:
    ctype = catalog.credential_type(type_name)
    if ctype is None:
        raise CredentialError(
            f"unknown credential type {type_name!r}; installed connectors declare: "
            + ", ".join(sorted(catalog.credential_types)),
            field="type",
        )
    return ctype


def _public(ctype: Any, fields: dict[str, Any]) -> dict[str, Any]:
    secret_fields = set(ctype.secret_fields)
    return {
        name: (mask_secret(value) if name in secret_fields else value)
        for name, value in fields.items()
    }


def _audited(ctype: Any, row: Credential) -> dict[str, Any]:
    """A credential's audit snapshot: name, type and the non-secret fields (never a secret,
    nor its masked hint; details name the secret fields that changed)."""
    secret_fields = set(ctype.secret_fields)
    public = row.public or {}
    return {
        "name": row.name,
        "type": row.type,
        "fields": {
            k: v for k, v in public.items() if k not in secret_fields and not k.startswith("_")
        },
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _view(catalog: Any, row: Credential) -> CredentialView:
    ctype = catalog.credential_type(row.type)
    public = dict(row.public or {})
    return CredentialView(
        id=str(row.id),
        name=row.name,
        type=row.type,
        kind=row.kind,
        type_label=ctype.label if ctype is not None else f"{row.type} (not installed)",
        public={k: v for k, v in public.items() if k != "_connected"},
        secret_fields=list(ctype.secret_fields) if ctype is not None else [],
        connected=bool(public.get("_connected")),
        token_expires_at=_iso(row.token_expires_at),
        created_at=_iso(row.created_at) or "",
        updated_at=_iso(row.updated_at) or "",
        created_by=str(row.created_by) if row.created_by else None,
    )


def _validate(ctype: Any, data: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(data) - set(ctype.fields.__struct_fields__))
    if unknown:
        raise CredentialError(
            f"unknown field(s) for a {ctype.label} credential: {', '.join(unknown)}",
            field=unknown[0],
        )
    try:
        fields: dict[str, Any] = ctype.validate(data)
    except sdk.ConfigError as err:
        raise CredentialError(err.message) from None
    return fields


def _clean_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise CredentialError("a credential needs a name", field="name")
    if len(name) > 200:
        raise CredentialError("the name is longer than 200 characters", field="name")
    return name


async def create_credential(
    session: AsyncSession,
    catalog: Any,
    keyring: Keyring,
    *,
    name: str,
    type_name: str,
    data: dict[str, Any],
    user_id: uuid.UUID | None,
) -> CredentialView:
    """Validate ``data`` against the type, encrypt and store it; audit ``credential.create``.

    Raises :class:`CredentialError` (unknown type, invalid or unknown fields, empty name).
    """
    ctype = _ctype(catalog, type_name)
    fields = _validate(ctype, {k: v for k, v in data.items() if v is not None})
    credential_id = uuid.uuid4()
    blob = _seal(keyring, credential_id, {"fields": fields, "token": None})
    row = Credential(
        id=credential_id,
        name=_clean_name(name),
        type=ctype.name,
        kind=ctype.kind,
        ciphertext=blob,
        key_id=keyring.current_id,
        public=_public(ctype, fields),
        created_by=user_id,
    )
    session.add(row)
    await audit.record(
        session,
        "credential.create",
        "credential",
        str(credential_id),
        actor_user_id=user_id,
        after=_audited(ctype, row),
        details={"type": ctype.name, "name": row.name},
    )
    await session.flush()
    await session.refresh(row)
    return _view(catalog, row)


async def _row(
    session: AsyncSession, credential_id: str | uuid.UUID, *, lock: bool = False
) -> Credential:
    try:
        key = credential_id if isinstance(credential_id, uuid.UUID) else uuid.UUID(credential_id)
    except ValueError:
        raise CredentialNotFound(str(credential_id)) from None
    query = select(Credential).where(Credential.id == key)
    if lock:
        query = query.with_for_update()
    row = (await session.execute(query)).scalar_one_or_none()
    if row is None:
        raise CredentialNotFound(str(credential_id))
    return row


async def get_credential(
    session: AsyncSession, catalog: Any, credential_id: str | uuid.UUID
) -> CredentialView:
    """The masked view of one credential; raises :class:`CredentialNotFound`."""
    return _view(catalog, await _row(session, credential_id))


async def list_credentials(
    session: AsyncSession,
    catalog: Any,
    types: tuple[str, ...] | None = None,
    visible: ColumnElement[bool] | None = None,
) -> list[CredentialView]:
    """Masked views of every credential (of ``types`` when given, matching ``visible``:
    :func:`backend.services.access.credential_filter`), by name."""
    query = select(Credential).order_by(Credential.name, Credential.created_at)
    if visible is not None:
        query = query.where(visible)
    if types:
        query = query.where(Credential.type.in_(types))
    rows = (await session.execute(query)).scalars().all()
    return [_view(catalog, row) for row in rows]


async def update_credential(
    session: AsyncSession,
    catalog: Any,
    keyring: Keyring,
    credential_id: str | uuid.UUID,
    *,
    name: str | None = None,
    data: dict[str, Any] | None = None,
    user_id: uuid.UUID | None,
) -> CredentialView:
    """Rename and/or change fields. Secret fields left out or empty keep their value.

    Changing an OAuth2 client (any field) drops its tokens: it must be connected again.
    Raises :class:`CredentialNotFound`, :class:`CredentialError`.
    """
    row = await _row(session, credential_id, lock=True)
    ctype = _ctype(catalog, row.type)
    before = _audited(ctype, row)
    changed: list[str] = []
    if name is not None:
        row.name = _clean_name(name)
        changed.append("name")
    if data is not None:
        payload = _open(keyring, row)
        secret_fields = set(ctype.secret_fields)
        merged = dict(payload["fields"])
        for key, value in data.items():
            if key in secret_fields and value in (None, ""):
                continue
            merged[key] = value
        fields = _validate(ctype, merged)
        changed.extend(sorted(k for k in fields if fields[k] != payload["fields"].get(k)))
        token = payload.get("token")
        if ctype.kind == "oauth2" and fields != payload["fields"]:
            token = None
            row.token_expires_at = None
        row.ciphertext = _seal(keyring, row.id, {"fields": fields, "token": token})
        row.key_id = keyring.current_id
        row.public = {**_public(ctype, fields), **({"_connected": True} if token else {})}
    row.updated_at = datetime.now(UTC)
    await audit.record(
        session,
        "credential.update",
        "credential",
        str(row.id),
        actor_user_id=user_id,
        before=before,
        after=_audited(ctype, row),
        details={"changed": changed},
    )
    await session.flush()
    return _view(catalog, row)


async def delete_credential(
    session: AsyncSession, credential_id: str | uuid.UUID, *, user_id: uuid.UUID | None
) -> None:
    """Delete a credential (nodes referencing it fail with ``credential_missing``)."""
    row = await _row(session, credential_id, lock=True)
    await audit.record(
        session,
        "credential.delete",
        "credential",
        str(row.id),
        actor_user_id=user_id,
        before={"name": row.name, "type": row.type},
        details={"type": row.type, "name": row.name},
    )
    await grants.delete_object_grants(session, "credential", row.id)
    await session.delete(row)
    await session.flush()


async def rotate_keys(session: AsyncSession, keyring: Keyring) -> int:
    """Re-encrypt every credential not under the keyring's current key; returns the count.

    Raises :class:`~backend.crypto.CryptoError` when a blob's key is not in the keyring
    (nothing is changed then: run it inside one transaction).
    """
    rows = (
        (
            await session.execute(
                select(Credential).where(Credential.key_id != keyring.current_id).with_for_update()
            )
        )
        .scalars()
        .all()
    )
    for row in rows:
        row.ciphertext = keyring.reencrypt(row.ciphertext, aad=_aad(row.id))
        row.key_id = keyring.current_id
    if rows:
        await audit.record(
            session,
            "credential.rotate_key",
            "keyring",
            keyring.current_id,
            details={"count": len(rows)},
        )
    await session.flush()
    return len(rows)


# -- OAuth2 ----------------------------------------------------------------------------


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

    Raises :class:`CredentialNotFound` and :class:`CredentialError` (not an OAuth2 credential).
    """
    row = await _row(session, credential_id)
    if row.kind != "oauth2":
        raise CredentialError(f"credential {row.name!r} is not an OAuth2 credential")
    fields = _open(keyring, row)["fields"]
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
    row.ciphertext = _seal(keyring, row.id, {"fields": fields, "token": token})
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
    row = await _row(session, pending.credential_id, lock=True)
    fields = _open(keyring, row)["fields"]
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
    return _view(catalog, row)


async def _refresh(
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


async def resolve_for_action(
    sessionmaker: async_sessionmaker[AsyncSession],
    catalog: Any,
    keyring: Keyring | None,
    credential_id: str,
    accepted: tuple[str, ...],
    *,
    info: sdk.ActionInfo,
    refresh_margin: float = 60.0,
    transport: httpx.AsyncBaseTransport | None = None,
    publisher_check: bool = True,
) -> dict[str, Any]:
    """Decrypt a credential for the action described by ``info`` (run/step identifiers).

    The publisher of the run's version must still be allowed to use the credential
    (:mod:`backend.services.references`); ``publisher_check=False`` skips that for
    callers outside any run (key rotation checks, tests of the decryption itself).

    Returns ``{**fields, "id", "type", "kind"}`` plus, for OAuth2, ``access_token``,
    ``token_type`` and ``expires_at`` (epoch seconds), refreshed first when it expires
    within ``refresh_margin`` seconds. Audits ``credential.use`` with the run, step and
    attempt. Raises ``sdk.NonRetryableError`` (kinds ``credential_missing``,
    ``credential_type_mismatch``, ``credential_not_granted`` (the publisher of the run's
    version may not use it), ``credential_not_connected``, ``credential_key``,
    ``credential_refresh_failed``) or a retryable ``sdk.ActionError`` when the token
    endpoint is unreachable.
    """
    if keyring is None:
        raise sdk.NonRetryableError(
            "credentials cannot be decrypted: RAILYARD_ENCRYPTION_KEY is not set",
            kind="credential_key",
        )
    async with sessionmaker() as session, session.begin():
        try:
            row = await _row(session, credential_id, lock=True)
        except CredentialNotFound:
            raise sdk.NonRetryableError(
                f"credential {credential_id} does not exist (deleted?): pick another one",
                kind="credential_missing",
            ) from None
        if row.type not in accepted:
            raise sdk.NonRetryableError(
                f"credential {row.name!r} is of type {row.type!r}; this field accepts "
                + ", ".join(accepted),
                kind="credential_type_mismatch",
            )
        refusal = (
            await references.run_publisher_refusal(session, info.run_id, str(row.id))
            if publisher_check
            else None
        )
        if refusal is not None:
            raise sdk.NonRetryableError(refusal, kind="credential_not_granted")
        try:
            payload = _open(keyring, row)
        except CryptoError as err:
            raise sdk.NonRetryableError(
                f"credential {row.name!r} cannot be decrypted: {err}", kind="credential_key"
            ) from None
        fields: dict[str, Any] = payload["fields"]
        result: dict[str, Any] = {**fields, "id": str(row.id), "type": row.type, "kind": row.kind}
        refreshed = False
        if row.kind == "oauth2":
            token = payload.get("token")
            if not token:
                raise sdk.NonRetryableError(
                    f"OAuth2 credential {row.name!r} is not connected: click Connect on the "
                    "credentials page",
                    kind="credential_not_connected",
                )
            expires_at = token.get("expires_at")
            if expires_at is not None and expires_at - time.time() < refresh_margin:
                token = await _refresh(keyring, row, fields, token, transport)
                refreshed = True
            result.update(
                access_token=token["access_token"],
                token_type=token.get("token_type", "Bearer"),
                expires_at=token.get("expires_at"),
            )
        await audit.record(
            session,
            "credential.use",
            "credential",
            str(row.id),
            details={
                "run_id": info.run_id,
                "workflow_id": info.workflow_id,
                "step_id": info.step_id,
                "attempt": info.attempt,
                "node_type": info.node_type,
                "refreshed": refreshed,
            },
        )
    return result
