"""identity: password metadata, external groups, session details, SSO links, login
throttling, password reset links, pending OIDC logins

Revision ID: 0009_identity
Revises: 0008_rbac
Create Date: 2026-12-01 07:40:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009_identity"
down_revision = "0008_rbac"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.alter_column("users", "password_hash", existing_type=sa.Text(), nullable=True)
    op.add_column("users", sa.Column("password_changed_at", _TZ, nullable=True))
    op.add_column("users", sa.Column("last_login_at", _TZ, nullable=True))
    op.add_column(
        "users",
        sa.Column(
            "external_groups",
            postgresql.JSONB(),
            nullable=False,
            server_default=sa.text("'[]'::jsonb"),
        ),
    )
    op.add_column(
        "sessions",
        sa.Column(
            "id",
            postgresql.UUID(as_uuid=True),
            nullable=False,
            server_default=sa.text("gen_random_uuid()"),
        ),
    )
    op.create_unique_constraint("uq_sessions_id", "sessions", ["id"])
    op.create_index("ix_sessions_user_id", "sessions", ["user_id"])
    op.add_column(
        "sessions", sa.Column("last_seen_at", _TZ, nullable=False, server_default=sa.func.now())
    )
    op.add_column("sessions", sa.Column("address", sa.String(64), nullable=True))
    op.add_column(
        "sessions", sa.Column("user_agent", sa.String(400), nullable=False, server_default="")
    )
    op.add_column(
        "sessions", sa.Column("method", sa.String(20), nullable=False, server_default="password")
    )
    op.create_table(
        "user_identities",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column(
            "user_id",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("issuer", sa.String(500), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("email", sa.String(320), nullable=False),
        sa.Column("created_at", _TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("last_login_at", _TZ, nullable=True),
        sa.UniqueConstraint("issuer", "subject"),
    )
    op.create_index("ix_user_identities_user_id", "user_identities", ["user_id"])
    op.create_table(
        "login_throttle",
        sa.Column("scope", sa.String(10), primary_key=True),
        sa.Column("key", sa.String(320), primary_key=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("window_start", _TZ, nullable=False),
        sa.Column("locked_until", _TZ, nullable=True),
    )
    op.create_table(
        "password_resets",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column(
            "user_id",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("purpose", sa.String(10), nullable=False),
        sa.Column(
            "created_by",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("users.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("created_at", _TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", _TZ, nullable=False),
        sa.Column("used_at", _TZ, nullable=True),
    )
    op.create_index("ix_password_resets_user_id", "password_resets", ["user_id"])
    op.create_table(
        "oidc_logins",
        sa.Column("state", sa.String(100), primary_key=True),
        sa.Column("nonce", sa.String(100), nullable=False),
        sa.Column("code_verifier", sa.String(200), nullable=False),
        sa.Column("next_path", sa.String(2000), nullable=False),
        sa.Column("created_at", _TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("expires_at", _TZ, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("oidc_logins")
    op.drop_index("ix_password_resets_user_id", table_name="password_resets")
    op.drop_table("password_resets")
    op.drop_table("login_throttle")
    op.drop_index("ix_user_identities_user_id", table_name="user_identities")
    op.drop_table("user_identities")
    for column in ("method", "user_agent", "address", "last_seen_at"):
        op.drop_column("sessions", column)
    op.drop_index("ix_sessions_user_id", table_name="sessions")
    op.drop_constraint("uq_sessions_id", "sessions", type_="unique")
    op.drop_column("sessions", "id")
    for column in ("external_groups", "last_login_at", "password_changed_at"):
        op.drop_column("users", column)
    op.execute("update users set password_hash = '' where password_hash is null")
    op.alter_column("users", "password_hash", existing_type=sa.Text(), nullable=False)
