"""Idempotency keys of API starts scoped to their workflow

Revision ID: 0033_scoped_start_keys
Revises: 0032_called_workflows_index
Create Date: 2026-12-05 13:30:00

A start's ``Idempotency-Key`` was stored as sent, one namespace for every workflow and
every caller: a key first used on one workflow answered that run to a start of another
(of another user too), and a caller could send a key the engine derives for a webhook
delivery or a schedule. Keys are now stored as ``api:<workflow id>:<SHA-256 of the key>``
(backend/services/runs/runs.py, ``start_key``); this rewrites the keys of the runs started
that way (trigger ``manual`` or ``api``), so a caller repeating a start from before the
upgrade still gets its run. PostgreSQL's ``sha256()`` (11 and later) hashes the key's
UTF-8 bytes as Python's ``hashlib`` does.

The downgrade keeps the scoped keys (the hash cannot be undone): a repeat of such a start
after a downgrade starts a new run.
"""

from alembic import op

revision = "0033_scoped_start_keys"
down_revision = "0032_called_workflows_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "update runs set idempotency_key = 'api:' || workflow_id::text || ':'"
        " || encode(sha256(convert_to(idempotency_key, 'UTF8')), 'hex')"
        " where trigger in ('manual', 'api') and idempotency_key is not null"
    )


def downgrade() -> None:
    pass
