"""A credential resolved for the action about to use it: decrypted, refreshed, audited."""

from __future__ import annotations

import time
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.crypto import CryptoError, Keyring
from backend.services import audit
from backend.services.connectors.credential_oauth import refresh_token
from backend.services.connectors.credentials import CredentialNotFound, load_row, open_payload
from backend.services.identity import references
from connectors import sdk


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
    (:mod:`backend.services.identity.references`); ``publisher_check=False`` skips that for
    callers outside any run (key rotation checks, tests of the decryption itself).

    Returns ``{**fields, "id", "type", "kind", "secret_fields"}`` (the names of the type's
    write-only fields, whose values the host redacts) plus, for OAuth2, ``access_token``,
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
            row = await load_row(session, credential_id, lock=True)
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
            await references.run_publisher_refusal(
                session,
                info.run_id,
                str(row.id),
                version=(info.workflow_id, info.workflow_version),
            )
            if publisher_check
            else None
        )
        if refusal is not None:
            raise sdk.NonRetryableError(refusal, kind="credential_not_granted")
        try:
            payload = open_payload(keyring, row)
        except CryptoError as err:
            raise sdk.NonRetryableError(
                f"credential {row.name!r} cannot be decrypted: {err}", kind="credential_key"
            ) from None
        fields: dict[str, Any] = payload["fields"]
        result: dict[str, Any] = {**fields, "id": str(row.id), "type": row.type, "kind": row.kind}
        # the host redacts these values from what the attempt outputs, raises and logs
        # (connectors/sdk/redaction.py); a type no longer installed: every text field
        ctype = catalog.credential_type(row.type)
        result["secret_fields"] = (
            list(ctype.secret_fields)
            if ctype is not None
            else [k for k, v in fields.items() if isinstance(v, str)]
        )
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
                token = await refresh_token(keyring, row, fields, token, transport)
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
