"""What retention removed: one row per data class per pass
(backend/services/operations/retention.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


class RetentionPass(Base):
    """One retention pass over one data class: rows older than ``cutoff`` (age rule) or
    beyond the newest ``max_rows`` (count rule) removed, ``deleted`` in total over
    ``batches`` short transactions; ``error`` when the pass stopped on a failure (what was
    deleted before it stays deleted)."""

    __tablename__ = "retention_passes"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    data_class: Mapped[str] = mapped_column(String(40))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    cutoff: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    max_rows: Mapped[int | None] = mapped_column(Integer, nullable=True)
    deleted: Mapped[int] = mapped_column(BigInteger)
    batches: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
