"""Large values stored once, by content: see backend/db/payloads.py."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, LargeBinary, String, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


class Payload(Base):
    """One large JSON value, keyed by the SHA-256 (hex) of its JSON text ``data``.

    ``size_bytes``: length of ``data``; ``summary`` (e.g. "list of 10000 items") and
    ``preview`` (the first characters of ``data``) are what APIs and pages show instead of
    the value. Rows are immutable but for ``last_used_at``; two runs producing the same value
    share one row.
    """

    __tablename__ = "payloads"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    summary: Mapped[str] = mapped_column(Text)
    preview: Mapped[str] = mapped_column(Text)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # the last write of a reference to it (retention: backend/services/operations/retention.py)
    last_used_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), index=True
    )
