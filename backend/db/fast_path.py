"""One statement in autocommit on asyncpg, on a connection of SQLAlchemy's pool.

The run store's hot statements (the run insert, the unlocked read, the one-statement
write, the lease extension) are each their own transaction. :class:`FastPath` sends such a
statement straight to the asyncpg connection of a pooled connection, checked out of and
back into the engine's own ``QueuePool``: the pool stays the one owner of connections, so
its size rules (the worker's pool size = ``max_jobs``, the connection formula in
docs/operations.md), its timeout (a pool exhausted for ``pool_timeout`` raises
SQLAlchemy's ``TimeoutError``, which the API answers 503), its recycling, its checkout
hook (backend/db/engine.py: a connection whose socket the server closed is replaced) and
the ``railyard_db_pool_*`` metrics hold for these statements too.

What it leaves out is the cost around the statement. Before, each one went through
``engine.connect()``, ``execution_options(isolation_level="AUTOCOMMIT")`` and the
connection's close (isolation reset, checkin), with two greenlet switches into SQLAlchemy's
synchronous pool code. Python CPU per statement in one process on uvloop, same
PostgreSQL (bench/db_roundtrip.py, medians of 5 interleaved rounds of 3,000 statements,
load average 3.3; ``SELECT $1::bigint`` / the unlocked read of backend/db/run_reads.py):

===============================================  ======  ========
path                                             select  read_run
===============================================  ======  ========
``engine.connect()`` + AUTOCOMMIT (before)       173 us  155 us
``engine.raw_connection()``, greenlet checkin    93 us   96 us
:class:`FastPath` (pool calls, no greenlets)     44 us   54 us
``asyncpg.Pool`` (a 2nd pool, reset on release)  136 us  115 us
one asyncpg connection held (the floor)          25 us   30 us
===============================================  ======  ========

So the pool's own bookkeeping is cheap; the greenlets and the ``Connection`` are not.
:class:`FastPath` calls the pool synchronously (no greenlet) when nothing in the checkout
or checkin can wait for I/O: an idle connection is in the pool to take, and the pool has
room to take it back. Otherwise (the pool is empty and must wait or connect, it is over
its size, or a recycled or closed connection must be replaced, which the pool signals by
raising ``MissingGreenlet`` before it has waited for anything, with the connection
record checked back in invalidated) the same call runs in a greenlet, as SQLAlchemy's
own ``AsyncEngine.raw_connection()`` does. A separate ``asyncpg.Pool`` was not chosen: it
costs more per statement than this (its release resets the connection with a statement
of its own), and it would be a second set of connections to size and count.

Errors: asyncpg's own exceptions propagate (backend/services/availability.py classifies
a lost connection). Only after PostgreSQL's answer to the statement (a constraint, a bad
value: :func:`connection_survives`) does the connection go back to the pool; after
anything else (a lost socket, a protocol error, cancellation, and the server ending the
session: ``57Pxx`` such as "terminating connection due to administrator command" when
PostgreSQL shuts down) it is invalidated, not reused, and the pool opens a new one at the
next checkout. A connection put back after the server ended its session would fail its
next statement with asyncpg's ``InternalClientError`` ("another operation is in
progress"). The same error meets a connection that sat idle in the pool when the server's
``FATAL`` reached it, before its closed socket is noticed: such a connection is
invalidated and the statement, which asyncpg refused before sending it, is sent once more
on another (:func:`stale_connection`); the error classifies as the database being
unavailable (503) should it come again. asyncpg prepares each statement once per
connection; a new connection prepares it again.

Calling the pool outside a greenlet relies on SQLAlchemy's pool raising
``MissingGreenlet`` before any I/O, which SQLAlchemy does not document: SQLAlchemy is
pinned and the seam tested against that version (tests/unit/test_private_seams.py,
tests/integration/test_fast_path.py).
"""

from __future__ import annotations

from typing import Any

import asyncpg
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import MissingGreenlet
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import PoolProxiedConnection, QueuePool
from sqlalchemy.util import greenlet_spawn


class FastPath:
    """Statements that are each their own transaction, on the asyncpg connections of
    ``engine``'s pool (see the module docstring). ``engine`` must use asyncpg and a
    ``QueuePool`` (what :func:`backend.db.engine.make_engine` builds)."""

    def __init__(self, engine: AsyncEngine) -> None:
        pool = engine.sync_engine.pool
        if not isinstance(pool, QueuePool):
            raise TypeError(f"the fast path needs a QueuePool, not {type(pool).__name__}")
        self.engine = engine
        self._pool = pool

    async def fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        """Run ``sql`` (asyncpg's ``$n`` form) with ``args`` as its own transaction and
        return its first row (``None``: no rows). Raises asyncpg's errors as they are and
        SQLAlchemy's ``TimeoutError`` when no connection frees up within the pool's
        timeout."""
        row: asyncpg.Record | None = await self._run("fetchrow", sql, args)
        return row

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        """Like :meth:`fetchrow`, all the rows."""
        rows: list[asyncpg.Record] = await self._run("fetch", sql, args)
        return rows

    async def _run(self, method: str, sql: str, args: tuple[Any, ...]) -> Any:
        """``method`` (an ``asyncpg.Connection`` query method) on a pooled connection; on
        a stale one (:func:`stale_connection`: the statement was never sent) once more on
        another."""
        for attempt in (1, 2):
            fairy = await self._checkout()
            try:
                result = await getattr(fairy.driver_connection, method)(sql, *args)
            except asyncpg.PostgresError as exc:
                if connection_survives(exc, fairy.driver_connection):
                    await self._checkin(fairy)  # PostgreSQL's answer: the connection is fine
                else:
                    fairy.invalidate(exc)
                raise
            except BaseException as exc:
                fairy.invalidate(exc)  # outside a greenlet no I/O: the socket is closed
                if attempt == 1 and stale_connection(exc):
                    continue
                raise
            await self._checkin(fairy)
            return result
        raise AssertionError("unreachable: the second attempt returns or raises")

    def connection(self) -> LazyConnection:
        """A SQLAlchemy connection in autocommit for the statements that are not on the
        fast path (large values, backend/db/payloads.py), opened only if one is run::

            async with fast.connection() as db:
                await payloads.store(db, found)
        """
        return LazyConnection(self.engine)

    async def _checkout(self) -> PoolProxiedConnection:
        """A connection of the pool: taken synchronously when one is idle, else (and when
        the pool says it must do I/O) in a greenlet."""
        pool = self._pool
        if pool.checkedin():
            try:
                return pool.connect()
            except MissingGreenlet:
                pass  # a recycled or closed connection to replace: the record is back
        return await greenlet_spawn(pool.connect)

    async def _checkin(self, fairy: PoolProxiedConnection) -> None:
        """Return ``fairy`` to the pool: synchronously when the pool has room for it (no
        transaction is open on it, so the reset does no I/O), else in a greenlet (an
        overflow connection is closed)."""
        pool = self._pool
        if pool.checkedin() < pool.size():
            fairy.close()
        else:
            await greenlet_spawn(fairy.close)


SESSION_ENDING_ERRORS: tuple[type[asyncpg.PostgresError], ...] = (
    asyncpg.PostgresConnectionError,  # 08xxx
    asyncpg.exceptions.OperatorInterventionError,  # 57xxx: shutdown, crash, cancelled, ...
)
"""PostgreSQL errors after which the session is over (or its state unknown)."""


def connection_survives(exc: asyncpg.PostgresError, connection: Any) -> bool:
    """True when ``exc`` is PostgreSQL's answer to the statement (a constraint, a value it
    cannot store) and ``connection`` (an ``asyncpg.Connection``) is still open: it may go
    back to the pool. False for the errors of :data:`SESSION_ENDING_ERRORS` and for a
    connection asyncpg already saw closed."""
    return not isinstance(exc, SESSION_ENDING_ERRORS) and not connection.is_closed()


_STALE_MESSAGES = ("cannot switch to state", "cannot perform operation")


def stale_connection(exc: BaseException) -> bool:
    """True when ``exc`` is asyncpg refusing to start a statement on a connection whose
    protocol is not idle (``InternalClientError`` "cannot switch to state 12; another
    operation (2) is in progress", ``InterfaceError`` "cannot perform operation: another
    operation is in progress"): raised before anything is sent, so the statement did not
    reach the server. It happens to a pooled connection in the moment between PostgreSQL's
    ``FATAL`` (a shutdown ends every session: 57P01) reaching it and its socket being seen
    closed; the connection is dead, the server going away."""
    return isinstance(exc, asyncpg.InternalClientError | asyncpg.InterfaceError) and str(
        exc
    ).startswith(_STALE_MESSAGES)


class LazyConnection:
    """An autocommit ``AsyncConnection`` of ``engine``, opened at the first
    :meth:`execute` and closed when the ``async with`` block ends. It answers the
    ``execute`` calls of backend/db/payloads.py and backend/db/run_state.py."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None

    async def execute(
        self, statement: Any, parameters: Any = None
    ) -> CursorResult[*tuple[Any, ...]]:
        """``AsyncConnection.execute`` on the connection (opened now if it is not)."""
        if self._conn is None:
            conn = self._engine.connect()
            await conn.start()
            self._conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        return await self._conn.execute(statement, parameters)

    async def __aenter__(self) -> LazyConnection:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()
