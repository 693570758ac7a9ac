"""Imported OpenAPI connectors: one row per connector, one per imported version.

A version holds the document as imported (gzip), its SHA-256, the definition Railyard
runs (:class:`connectors.openapi.definition.ConnectorDefinition` as JSON) and the
node-type version of each operation (``{operation key: version}``): an operation keeps
its version while re-imports leave it unchanged, so published workflows keep calling it
as it was built (docs/connectors.md, "OpenAPI connectors").
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Integer, LargeBinary, String, UniqueConstraint, func
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


def _uuid() -> uuid.UUID:
    return uuid.uuid4()


class OpenApiConnector(Base):
    """A connector made from an OpenAPI document; ``name`` prefixes its node types."""

    __tablename__ = "openapi_connectors"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    name: Mapped[str] = mapped_column(String(40), unique=True)
    label: Mapped[str] = mapped_column(String(200))
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class OpenApiConnectorVersion(Base):
    """One import of a connector's document (``number`` counts from 1)."""

    __tablename__ = "openapi_connector_versions"
    __table_args__ = (UniqueConstraint("connector_id", "number"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    connector_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("openapi_connectors.id", ondelete="CASCADE"), index=True
    )
    number: Mapped[int] = mapped_column(Integer)
    document_sha256: Mapped[str] = mapped_column(String(64))
    document_gzip: Mapped[bytes] = mapped_column(LargeBinary)
    source_url: Mapped[str] = mapped_column(String(2000), default="")
    definition: Mapped[dict[str, Any]] = mapped_column(JSONB)
    operation_versions: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    changes: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
