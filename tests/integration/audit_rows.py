"""Helpers for tests of the append-only audit log: insert aged rows, catch refusals."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from backend.runtime import Runtime


async def add_row(runtime: Runtime, action: str = "workflow.create", age_days: int = 0) -> int:
    """Insert an audit row ``age_days`` old (inserting is allowed; it returns the id)."""
    async with runtime.engine.begin() as conn:
        return int(
            (
                await conn.execute(
                    text(
                        "insert into audit_log (at, action, object_type, object_id, details,"
                        " actor_label) values (now() - make_interval(days => :d), :a, 'workflow',"
                        " 'w1', '{}', 'ada@example.com') returning id"
                    ),
                    {"d": age_days, "a": action},
                )
            ).scalar_one()
        )


async def refused(runtime: Runtime, sql: str) -> str:
    """Run ``sql`` in its own transaction and return PostgreSQL's refusal message."""
    with pytest.raises(DBAPIError) as info:
        async with runtime.engine.begin() as conn:
            await conn.execute(text(sql))
    return str(info.value)
