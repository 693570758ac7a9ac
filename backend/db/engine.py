"""Database engine and session factory."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)


def make_engine(database_url: str, *, pool_size: int = 10) -> AsyncEngine:
    """Create the async engine (asyncpg). ``database_url`` is ``postgresql+asyncpg://...``."""
    return create_async_engine(
        database_url, pool_size=pool_size, max_overflow=20, pool_pre_ping=True
    )


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Session factory; sessions don't expire objects on commit."""
    return async_sessionmaker(engine, expire_on_commit=False)
