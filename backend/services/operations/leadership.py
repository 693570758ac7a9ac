"""Which ``railyard scheduler`` leads, as PostgreSQL knows it.

The leader holds a session-level advisory lock on :data:`SCHEDULER_LOCK_KEY`
(backend/workers/scheduler.py) and names its session ``railyard-scheduler <host>:<pid>``
(``application_name``, :func:`name_session`), so anyone reading ``pg_locks`` and
``pg_stat_activity`` (the dashboard, an operator in psql) sees the leader: the truth, not a
heartbeat that could lag it.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

SCHEDULER_LOCK_KEY = 0x52595343484544
"""The leader lock's key: the ASCII bytes of "RYSCHED" as an integer (any constant unique
to Railyard)."""

SESSION_PREFIX = "railyard-scheduler "
"""Start of the leader session's ``application_name``."""

NAMEDATALEN = 63
"""PostgreSQL truncates ``application_name`` to this many bytes (NAMEDATALEN - 1)."""


def process_name() -> str:
    """This process as ``<host>:<pid>`` (the name attempts record for workers too)."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def name_session(conn: AsyncConnection, name: str | None) -> None:
    """Set ``conn``'s session ``application_name`` to the leader's (``name``: see
    :func:`process_name`), or back to the server's default with None."""
    if name is None:
        await conn.execute(text("reset application_name"))
    else:
        value = (SESSION_PREFIX + name).encode()[:NAMEDATALEN].decode(errors="ignore")
        await conn.execute(text("select set_config('application_name', :v, false)"), {"v": value})
    await conn.commit()


async def scheduler_leader(session: AsyncSession) -> tuple[str, datetime | None] | None:
    """``(name, connected at)`` of the scheduler holding the leader lock, or None when no
    scheduler leads; ``name`` as :func:`process_name` gave it (possibly truncated), or the
    session's client address when it did not name itself."""
    row = (
        await session.execute(
            text(
                "select a.application_name, host(a.client_addr), a.backend_start"
                " from pg_locks l join pg_stat_activity a on a.pid = l.pid"
                " where l.locktype = 'advisory' and l.granted and l.classid = :hi"
                " and l.objid = :lo and l.objsubid = 1"
            ),
            {"hi": SCHEDULER_LOCK_KEY >> 32, "lo": SCHEDULER_LOCK_KEY & 0xFFFFFFFF},
        )
    ).first()
    if row is None:
        return None
    application, client, since = row
    if application and application.startswith(SESSION_PREFIX):
        return application.removeprefix(SESSION_PREFIX), since
    return client or "unknown", since
