"""SQLAlchemy 2 models: the only place table shapes are declared.

All timestamps are ``timestamptz`` in UTC. JSON documents (diagrams, graphs, step inputs and
outputs) are ``jsonb``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of every Railyard table."""

    type_annotation_map = {dict[str, Any]: JSONB, Any: JSONB}


def _uuid() -> uuid.UUID:
    return uuid.uuid4()


class User(Base):
    """An account. ``password_hash`` is an argon2id hash (argon2-cffi), ``None`` when the
    account has no local password (single sign-on only, or a reset/invite is pending).
    ``external_groups`` holds the group names the identity provider claimed at the last
    single sign-on (a JSON list of strings)."""

    __tablename__ = "users"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    display_name: Mapped[str] = mapped_column(String(200), default="")
    password_hash: Mapped[str | None] = mapped_column(Text, nullable=True)
    role: Mapped[str] = mapped_column(String(20), default="editor")
    # "human" logs in interactively; "service" (a service account) only through API tokens
    kind: Mapped[str] = mapped_column(String(10), default="human", server_default="human")
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    password_changed_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    last_login_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    external_groups: Mapped[Any] = mapped_column(
        JSONB, default=list, server_default=text("'[]'::jsonb")
    )


class Session(Base):
    """A server-side login session; only the SHA-256 of the cookie token is stored.

    ``id`` names the session in admin pages and APIs (the token hash never leaves the
    server); ``address``/``user_agent`` are the client's at login; ``last_seen_at`` is
    refreshed at most once a minute; ``method`` is ``password`` or ``oidc``.
    """

    __tablename__ = "sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), unique=True, default=_uuid, server_default=text("gen_random_uuid()")
    )
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_seen_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    address: Mapped[str | None] = mapped_column(String(64), nullable=True)
    user_agent: Mapped[str] = mapped_column(String(400), default="", server_default="")
    method: Mapped[str] = mapped_column(String(20), default="password", server_default="password")


class Workflow(Base):
    """A named workflow with a draft diagram and a pointer to its active version."""

    __tablename__ = "workflows"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    owner_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    project_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("projects.id", ondelete="SET NULL"), nullable=True, index=True
    )
    draft: Mapped[dict[str, Any]] = mapped_column(JSONB)
    active_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    webhook_token: Mapped[str] = mapped_column(String(64), unique=True)
    # run control settings (backend.services.workflows.workflows.WORKFLOW_SETTINGS):
    # error_workflow_id,
    # run_timeout_seconds, max_concurrent_runs; absent keys mean "no limit / none"
    settings: Mapped[dict[str, Any]] = mapped_column(
        JSONB, default=dict, server_default=text("'{}'::jsonb")
    )
    # optimistic concurrency of the draft: bumped by every draft save; a save based on an
    # older revision is refused (backend.services.workflows.workflows.save_draft)
    draft_revision: Mapped[int] = mapped_column(
        BigInteger, default=0, server_default=text("0"), nullable=False
    )
    draft_saved_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    draft_saved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # archived ("deleted" in the UI): out of the lists, no webhook, schedule or new runs;
    # versions and runs stay (backend.services.workflows.workflow_lifecycle)
    archived_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True, index=True
    )
    archived_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    # data pinned on the draft's nodes for test runs (backend.services.workflows.pins):
    # {node_id: {"data": any JSON, "pinned_at": ISO time, "pinned_by": user id or null}}
    pinned_data: Mapped[dict[str, Any]] = mapped_column(
        JSONB, default=dict, server_default=text("'{}'::jsonb")
    )
    # labels for search and facets (backend.services.workflows.workflows.normalize_tags): lower case
    tags: Mapped[list[str]] = mapped_column(
        ARRAY(Text), default=list, server_default=text("'{}'::text[]")
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class WorkflowVersion(Base):
    """An immutable version: diagram, compiled graph, content hash, who, when, and the
    publisher's note.

    ``kind`` is ``published`` for the versions publishing creates (numbered 1, 2, ...) and
    ``draft`` for the unlisted snapshots of the draft that test runs execute (number 0,
    never active, never listed; backend.services.workflows.draft_runs). Numbers and hashes are
    unique among published versions; snapshots are unique by hash.
    """

    __tablename__ = "workflow_versions"
    __table_args__ = (
        Index(
            "uq_workflow_versions_number",
            "workflow_id",
            "number",
            unique=True,
            postgresql_where=text("kind = 'published'"),
        ),
        Index("uq_workflow_versions_hash", "workflow_id", "kind", "content_hash", unique=True),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    workflow_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("workflows.id", ondelete="CASCADE"), index=True
    )
    number: Mapped[int] = mapped_column(Integer)
    diagram: Mapped[dict[str, Any]] = mapped_column(JSONB)
    graph: Mapped[dict[str, Any]] = mapped_column(JSONB)
    content_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(10), default="published", server_default="published")
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # the publisher's note (what changed, why); "" when none was given
    note: Mapped[str] = mapped_column(Text, default="", server_default=text("''"))


class Run(Base):
    """One execution of a workflow version. ``response`` holds a Respond step's answer."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_workflow_created", "workflow_id", "created_at"),
        Index(
            "ix_runs_active",
            "status",
            postgresql_where=text("status in ('queued','running','waiting')"),
        ),
        Index(
            "ix_runs_deadline",
            "deadline_at",
            postgresql_where=text(
                "status in ('running','waiting','paused') and deadline_at is not null"
            ),
        ),
        # columns NULL for most runs: partial indexes, so such a run writes no entry
        # (migration 0024_pg_cost; ix_runs_created_id of 0020_search leads with created_at)
        Index("ix_runs_finished", "finished_at", postgresql_where=text("finished_at is not null")),
        Index("ix_runs_version_id", "version_id"),
        # a parent's pass: its calling steps, their highest index, their open children
        # (migration 0030_children_pass)
        Index(
            "ix_runs_parent_run_id",
            "parent_run_id",
            "parent_step_id",
            "parent_index",
            postgresql_where=text("parent_run_id is not null"),
        ),
        Index(
            "ix_runs_parent_open",
            "parent_run_id",
            "parent_step_id",
            "parent_index",
            postgresql_where=text("parent_run_id is not null and status <> 'succeeded'"),
        ),
        Index("ix_runs_rerun_of", "rerun_of", postgresql_where=text("rerun_of is not null")),
        Index(
            "ix_runs_idempotency_key",
            "idempotency_key",
            unique=True,
            postgresql_where=text("idempotency_key is not null"),
        ),
        # room on each page for the new version of a running run's row (HOT updates)
        {"postgresql_with": {"fillfactor": 80}},
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    # kept (unlike the children's, RUN_CHILD below): only their checks' key-share locks make
    # a run insert and its workflow's deletion or its version's retention wait for each other
    workflow_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    version_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workflow_versions.id"))
    version_number: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20))
    trigger: Mapped[str] = mapped_column(String(20))
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    input: Mapped[Any] = mapped_column(JSONB, nullable=True)
    output: Mapped[Any] = mapped_column(JSONB, nullable=True)
    error: Mapped[Any] = mapped_column(JSONB, nullable=True)
    response: Mapped[Any] = mapped_column(JSONB, nullable=True)
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # child runs of a Sub-workflow / For-each step: (parent run, parent step, item index)
    parent_run_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), nullable=True
    )
    parent_step_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    parent_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # run timeout: the due time (started_at + the workflow's run_timeout_seconds)
    deadline_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # a re-run links the run it repeats
    rerun_of: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), nullable=True
    )
    # bumped by every engine write of the run (run_store.save_state): a worker that wrote
    # revision N and finds N again under the run lock may reuse the step records it holds
    revision: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    # full-text search: run_search_vector(input, output, error), kept by a trigger
    # (migration 0020_search); deferred so loading a run never reads it
    search_vector: Mapped[Any] = mapped_column(TSVECTOR, nullable=True, deferred=True)


# RUN_CHILD: ``step_runs``, ``attempts`` and ``events`` hold ``run_id`` WITHOUT a foreign
# key (migration 0025_run_children_fk): its check locked the run row once per insert and
# bought nothing, since every statement that inserts a child row also inserts or locks its
# run row (backend/db/run_writes.py, backend/db/run_transaction.py; docs/engine.md, "The
# run's children"). The cascade on delete is kept by the statement trigger
# ``runs_delete_children`` on ``runs``.


class StepRun(Base):
    """State of one step in one run (see backend.engine.states.StepStatus)."""

    __tablename__ = "step_runs"
    __table_args__ = (
        UniqueConstraint("run_id", "step_id"),
        Index("ix_step_runs_ready", "not_before", postgresql_where=text("status = 'ready'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))  # RUN_CHILD (above)
    step_id: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20))
    ports: Mapped[Any] = mapped_column(JSONB, default=list)
    input: Mapped[Any] = mapped_column(JSONB, nullable=True)
    output: Mapped[Any] = mapped_column(JSONB, nullable=True)
    error: Mapped[Any] = mapped_column(JSONB, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    data: Mapped[Any] = mapped_column(JSONB, nullable=True)


class Attempt(Base):
    """One attempt of an action step; ``fencing_token`` guards late completions."""

    __tablename__ = "attempts"
    __table_args__ = (
        UniqueConstraint("run_id", "step_id", "number"),
        Index("ix_attempts_lease", "lease_expires_at", postgresql_where=text("status = 'running'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))  # RUN_CHILD (above)
    step_id: Mapped[str] = mapped_column(String(200))
    number: Mapped[int] = mapped_column(Integer)
    fencing_token: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(20))
    worker: Mapped[str] = mapped_column(String(200), default="")
    idempotency_key: Mapped[str] = mapped_column(String(300))
    input: Mapped[Any] = mapped_column(JSONB, nullable=True)
    config: Mapped[Any] = mapped_column(JSONB, nullable=True)
    output: Mapped[Any] = mapped_column(JSONB, nullable=True)
    error: Mapped[Any] = mapped_column(JSONB, nullable=True)
    lease_expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Event(Base):
    """Append-only outbox of state changes, written in the same transaction as the change."""

    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_run", "run_id", "id"),
        # BRIN: retention's cutoff reads it; an event writes no entry (0034_events_created_brin)
        Index(
            "ix_events_created",
            "created_at",
            postgresql_using="brin",
            postgresql_with={"autosummarize": "on"},
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    # NULL: an outbox event of no run; otherwise RUN_CHILD (above)
    run_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), nullable=True)
    kind: Mapped[str] = mapped_column(String(60))
    step_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    data: Mapped[Any] = mapped_column(JSONB, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


from backend.db.models.access import Grant, Group, GroupMember, Project  # noqa: E402,F401
from backend.db.models.credentials import AuditLog, Credential, OAuthState  # noqa: E402,F401
from backend.db.models.identity import (  # noqa: E402,F401
    LoginThrottle,
    OidcLogin,
    PasswordReset,
    UserIdentity,
)
from backend.db.models.openapi import OpenApiConnector, OpenApiConnectorVersion  # noqa: E402,F401
from backend.db.models.payloads import Payload  # noqa: E402,F401
from backend.db.models.retention import RetentionPass  # noqa: E402,F401
from backend.db.models.search import SearchCursor  # noqa: E402,F401
from backend.db.models.subscriptions import (  # noqa: E402,F401
    DeliveryAttempt,
    EventDelivery,
    EventSubscription,
)
from backend.db.models.triggers import *  # noqa: E402, F403  (trigger tables)
