"""Credentials: create, list (masked), update, delete, rotate keys; the sealed payload.

The OAuth2 authorization-code flow is in :mod:`backend.services.connectors.credential_oauth`, the
resolution for a running action in :mod:`backend.services.connectors.credential_use`.

Rules (see docs/credentials.md):

- A credential has a connector-declared type (``catalog.credential_type(name)``); its
  fields are validated against the type and stored encrypted (:mod:`backend.crypto`,
  associated data ``b"credential:<id>"``). The plaintext JSON is
  ``{"fields": {...}, "token": {...} | null}``.
- Nothing returns a secret to a caller except
  :func:`backend.services.connectors.credential_use.resolve_for_action`, which the engine calls
  right before an action runs. Views carry ``public``: non-secret fields and masked hints
  of secret ones (``"••••1234"`` for secrets of 16+ characters, else ``"••••"``).
- Updating with a secret field missing or empty keeps the stored secret (write-only fields).
- Every create, update, delete, connect and use writes an :class:`AuditLog` row in the same
  transaction.
- OAuth2 (``kind == "oauth2"``, :mod:`backend.services.connectors.credential_oauth`):
  ``start_oauth``
  stores a single-use ``state`` with a PKCE verifier (S256) and returns the provider's
  authorization URL; ``finish_oauth`` exchanges the code (authlib) and stores the tokens
  encrypted; ``resolve_for_action`` refreshes the access token when it expires within
  ``refresh_margin`` seconds, holding the credential row lock so concurrent actions
  refresh once.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.crypto import Keyring
from backend.db.models.credentials import Credential
from backend.services import audit
from backend.services.identity import grants
from backend.services.timestamps import rfc3339
from connectors import sdk

__all__ = [
    "CredentialError",
    "CredentialNotFound",
    "CredentialView",
    "create_credential",
    "delete_credential",
    "get_credential",
    "list_credentials",
    "mask_secret",
    "rotate_keys",
    "update_credential",
]


class CredentialError(ValueError):
    """Invalid credential input; ``field`` names the offending field when known."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class NotOAuth2(CredentialError):
    """The credential exists but is not an OAuth2 credential, so it cannot be connected."""


class CredentialNotFound(LookupError):
    """No credential (or pending OAuth2 state) with that id."""


class CredentialView(msgspec.Struct):
    """What may be shown about a credential (also the API's wire type): never a secret.

    ``public`` maps every field of the type to its value (non-secret) or a masked hint
    (secret, ``""`` when unset); ``connected`` tells whether an OAuth2 credential holds
    tokens; ``token_expires_at`` is when its access token expires. Times are RFC 3339 UTC
    ending ``Z``.
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


def seal_payload(keyring: Keyring, credential_id: uuid.UUID, payload: dict[str, Any]) -> bytes:
    """Encrypt ``payload`` (``{"fields", "token"}``) for credential ``credential_id``."""
    return keyring.encrypt(msgspec.json.encode(payload), aad=_aad(credential_id))


def open_payload(keyring: Keyring, row: Credential) -> dict[str, Any]:
    """Decrypt a stored credential row's payload (``{"fields", "token"}``)."""
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


def view_of(catalog: Any, row: Credential) -> CredentialView:
    """The masked :class:`CredentialView` of a stored row."""
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
        token_expires_at=rfc3339(row.token_expires_at),
        created_at=rfc3339(row.created_at),
        updated_at=rfc3339(row.updated_at),
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
    blob = seal_payload(keyring, credential_id, {"fields": fields, "token": None})
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
    return view_of(catalog, row)


async def load_row(
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
    return view_of(catalog, await load_row(session, credential_id))


async def list_credentials(
    session: AsyncSession,
    catalog: Any,
    types: tuple[str, ...] | None = None,
    visible: ColumnElement[bool] | None = None,
) -> list[CredentialView]:
    """Masked views of every credential (of ``types`` when given, matching ``visible``:
    :func:`backend.services.identity.access.credential_filter`), by name."""
    query = select(Credential).order_by(Credential.name, Credential.created_at)
    if visible is not None:
        query = query.where(visible)
    if types:
        query = query.where(Credential.type.in_(types))
    rows = (await session.execute(query)).scalars().all()
    return [view_of(catalog, row) for row in rows]


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
    row = await load_row(session, credential_id, lock=True)
    ctype = _ctype(catalog, row.type)
    before = _audited(ctype, row)
    changed: list[str] = []
    if name is not None:
        row.name = _clean_name(name)
        changed.append("name")
    if data is not None:
        payload = open_payload(keyring, row)
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
        row.ciphertext = seal_payload(keyring, row.id, {"fields": fields, "token": token})
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
    return view_of(catalog, row)


async def delete_credential(
    session: AsyncSession, credential_id: str | uuid.UUID, *, user_id: uuid.UUID | None
) -> None:
    """Delete a credential (nodes referencing it fail with ``credential_missing``)."""
    row = await load_row(session, credential_id, lock=True)
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
