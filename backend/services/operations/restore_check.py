"""What a restored database must still hold: row counts and secrets that decrypt.

Used by the restore drill (backend/cli/restore_drill.py): the counts of the source are
read in the same snapshot ``pg_dump`` copies, so source and restore must agree exactly.
"""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from backend.crypto import CryptoError, Keyring
from backend.db.models import Run, StepRun, User, Workflow, WorkflowVersion
from backend.db.models.credentials import AuditLog, Credential
from backend.db.models.triggers import Schedule, WebhookSecret
from backend.services.connectors.credentials import open_payload
from backend.services.triggers.webhooks import secret_aad

INVENTORY = {
    "workflows": Workflow,
    "workflow_versions": WorkflowVersion,
    "runs": Run,
    "step_runs": StepRun,
    "credentials": Credential,
    "webhook_secrets": WebhookSecret,
    "schedules": Schedule,
    "users": User,
    "audit_log": AuditLog,
}
"""Tables counted by :func:`inventory`, by name."""


async def inventory(conn: AsyncConnection | AsyncSession) -> dict[str, int]:
    """``{table: row count}`` of :data:`INVENTORY`, read in ``conn``'s transaction."""
    counts = {}
    for name, model in INVENTORY.items():
        counts[name] = int(
            (await conn.execute(select(func.count()).select_from(model))).scalar_one()
        )
    return counts


async def schema_revision(conn: AsyncConnection | AsyncSession) -> str:
    """The Alembic revision the database is at (``alembic_version.version_num``)."""
    return str((await conn.execute(text("select version_num from alembic_version"))).scalar_one())


async def open_every_secret(session: AsyncSession, keyring: Keyring) -> tuple[int, int]:
    """Decrypt every credential and webhook secret with ``keyring``; returns how many of
    each (credentials, webhook secrets) opened.

    Raises :class:`~backend.crypto.CryptoError` naming the first row that does not
    decrypt (wrong key, or a blob damaged or moved to another row).
    """
    credentials = (await session.execute(select(Credential))).scalars().all()
    for row in credentials:
        try:
            open_payload(keyring, row)
        except CryptoError as exc:
            raise CryptoError(
                f"credential {row.id} ({row.name!r}) does not decrypt: {exc}"
            ) from exc
    secrets = (await session.execute(select(WebhookSecret))).scalars().all()
    for secret in secrets:
        try:
            keyring.decrypt(secret.ciphertext, aad=secret_aad(secret.workflow_id))
        except CryptoError as exc:
            raise CryptoError(
                f"webhook secret of workflow {secret.workflow_id} does not decrypt: {exc}"
            ) from exc
    return len(credentials), len(secrets)
