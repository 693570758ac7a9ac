"""payloads: large run values stored once by content hash

Revision ID: 0011_payloads
Revises: 0009_identity
Create Date: 2026-12-01 08:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_payloads"
down_revision = "0009_identity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "payloads",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("preview", sa.Text(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("sha256"),
    )


def downgrade() -> None:
    op.drop_table("payloads")
