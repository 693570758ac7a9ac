"""Group commit: the statements that concurrent callers each want committed, written as
one statement (one transaction, one WAL flush) per group.

The technique is the classic one of database engines (PostgreSQL itself groups the WAL
flushes of backends that commit at the same moment: ``commit_delay``,
https://www.postgresql.org/docs/current/wal-configuration.html). Here it is done one level
up, so that not only the flush is shared but the statement's round trip, its executor start
and its commit record too, in PostgreSQL and in Python.

:class:`GroupCommit` adds no waiting of its own. A caller whose item finds fewer than
``max_in_flight`` groups being written starts a group at once, alone if nobody else is
waiting; items that arrive while the groups in flight are written wait for the next one, and
go together, at most ``max_items`` (and ``max_bytes`` of encoded items) at a time. At low
load every item is its own group, as without grouping; under load the groups grow by
themselves with the number of callers waiting.

Outcomes stay each caller's own:

- a caller cancelled before its group is sent is left out of it (nothing is written for it);
  once sent, its item is written (or not) with the others, whatever happens to the caller;
- when PostgreSQL refuses a group (a constraint, a value it cannot store: any
  ``asyncpg.PostgresError`` that is its answer to the statement, also when wrapped by
  SQLAlchemy: :func:`refused_by_postgres`), each item of it is written
  again alone, so only the items at fault fail, each with its own error;
- the server ending the session (shutting down: ``57Pxx``) is not such an answer: like
  any other error (a lost connection, an exhausted pool) it fails every item of the
  group with that error, as it would have failed each of their own statements.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import asyncpg

_R = TypeVar("_R")

DEFAULT_MAX_ITEMS = 64
"""Items in one group at most."""

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
"""Encoded size of one group at most (bytes); an item larger than this goes alone."""

DEFAULT_MAX_IN_FLIGHT = 2
"""Groups being written at the same time at most (each on its own connection)."""


class GroupCommit(Generic[_R]):
    """Writes encoded items (``bytes``, e.g. one JSON object each) in groups.

    ``write`` takes the items of one group and returns one result per item, in order
    (it runs one statement, which is its own transaction); it is called by at most
    ``max_in_flight`` tasks at a time. See the module docstring for sizes and errors.
    """

    def __init__(
        self,
        write: Callable[[Sequence[bytes]], Awaitable[Sequence[_R]]],
        *,
        max_items: int = DEFAULT_MAX_ITEMS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if max_items < 1 or max_in_flight < 1:
            raise ValueError("max_items and max_in_flight must be at least 1")
        self._write = write
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.max_in_flight = max_in_flight
        self._waiting: list[tuple[bytes, asyncio.Future[_R]]] = []
        self._writers: set[asyncio.Task[None]] = set()
        self.groups = 0  # groups written (for benchmarks and tests)
        self.items = 0  # items written in them

    async def submit(self, item: bytes) -> _R:
        """Write ``item`` with whatever else is waiting and return its result. Raises what
        writing it raised (see the module docstring)."""
        future: asyncio.Future[_R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if len(self._writers) < self.max_in_flight:
            self._start_writer()
        return await future

    def _start_writer(self) -> None:
        task = asyncio.create_task(self._drain())
        self._writers.add(task)
        task.add_done_callback(self._writer_done)

    def _writer_done(self, task: asyncio.Task[None]) -> None:
        """A writer left: its done callback runs a loop turn after it found nothing to
        write, so an item may have arrived meanwhile and found every place taken."""
        self._writers.discard(task)
        if any(not future.done() for _, future in self._waiting):
            if len(self._writers) < self.max_in_flight:
                self._start_writer()

    async def _drain(self) -> None:
        """Write groups while items wait."""
        while self._waiting:
            group = self._next_group()
            if group:
                await self._write_group(group)

    def _next_group(self) -> list[tuple[bytes, asyncio.Future[_R]]]:
        """Take the oldest waiting items that fit one group (callers gone are dropped)."""
        group: list[tuple[bytes, asyncio.Future[_R]]] = []
        size = 0
        taken = 0
        for item, future in self._waiting:
            if len(group) >= self.max_items or (group and size + len(item) > self.max_bytes):
                break
            taken += 1
            if not future.done():  # a cancelled caller's item is not written
                group.append((item, future))
                size += len(item)
        del self._waiting[:taken]
        return group

    async def _write_group(self, group: list[tuple[bytes, asyncio.Future[_R]]]) -> None:
        items = [item for item, _ in group]
        try:
            results = await self._write(items)
            if len(results) != len(items):  # a caller must never be left waiting
                raise RuntimeError(f"{len(results)} results for a group of {len(items)}")
        except Exception as exc:
            if len(group) == 1 or not refused_by_postgres(exc):
                _fail(group, exc)
                return
            for one in group:  # refused as a group: each alone, so only the culprit fails
                await self._write_group([one])
            return
        except BaseException as exc:
            _fail(group, exc)
            raise
        self.groups += 1
        self.items += len(items)
        for (_, future), result in zip(group, results, strict=True):
            if not future.done():
                future.set_result(result)


def numbered(items: Sequence[bytes]) -> str:
    """The JSON array text of ``items`` (JSON objects), each with its position added as
    its first key, ``ord`` (how a group's statement reports per item, in order)."""
    return (
        b"[" + b",".join(b'{"ord":%d,' % i + item[1:] for i, item in enumerate(items)) + b"]"
    ).decode()


def refused_by_postgres(exc: BaseException) -> bool:
    """True when ``exc``, or an error it was raised from (a driver error wrapped by
    SQLAlchemy), is PostgreSQL's answer to the statement (a constraint, a value it cannot
    store), not a lost connection."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, asyncpg.PostgresError):
            return not isinstance(seen, _SESSION_ENDED)
        seen = seen.__cause__
    return False


_SESSION_ENDED = (asyncpg.PostgresConnectionError, asyncpg.exceptions.OperatorInterventionError)
"""PostgreSQL errors that end the session (08xxx, 57xxx: shutting down, crashed): the
server's state, not an answer about the group's items, so they are not written alone."""


def _fail(group: list[tuple[bytes, asyncio.Future[_R]]], exc: BaseException) -> None:
    """Every caller of ``group`` gets ``exc`` (cancelled with the writer when it was
    cancelled)."""
    for _, future in group:
        if future.done():
            continue
        if isinstance(exc, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(exc)
