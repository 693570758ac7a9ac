"""The search indexer's position in each outbox (docs/search.md, "Elasticsearch")."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, String, func, text
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


class SearchCursor(Base):
    """``position``: the highest id of the outbox ``name`` (``<index>:events``,
    ``<index>:audit``) below which every row has been sent to the search index."""

    __tablename__ = "search_cursors"

    name: Mapped[str] = mapped_column(String(60), primary_key=True)
    position: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )
