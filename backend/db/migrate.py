"""Apply Alembic migrations programmatically (``railyard migrate``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(database_url: str) -> Config:
    """Alembic config pointing at the bundled migrations and ``database_url``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", database_url)
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate the database to ``revision``. Blocking; call it off the event loop."""
    command.upgrade(alembic_config(database_url), revision)


async def upgrade_async(database_url: str) -> None:
    """:func:`upgrade` in a thread (env.py runs its own event loop)."""
    await asyncio.to_thread(upgrade, database_url)
