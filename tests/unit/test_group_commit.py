"""Group commit (backend/db/group_commit.py): items that wait while a group is written go
together in the next; each caller keeps its own outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg
import pytest
from sqlalchemy.exc import IntegrityError

from backend.db.group_commit import GroupCommit, refused_by_postgres


class Writer:
    """A ``write`` that records each group and holds it until released."""

    def __init__(self, refuse: bytes | None = None, fail: BaseException | None = None) -> None:
        self.groups: list[list[bytes]] = []
        self.release = asyncio.Event()
        self.refuse = refuse
        self.fail = fail

    async def __call__(self, items: Sequence[bytes]) -> list[str]:
        self.groups.append(list(items))
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        if self.refuse is not None and self.refuse in items:
            raise asyncpg.UniqueViolationError("duplicate key value")
        return [item.decode().upper() for item in items]


async def _spin() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _behind(
    commit: GroupCommit[str], first: bytes, rest: Sequence[bytes]
) -> tuple[asyncio.Task[str], list[asyncio.Task[str]]]:
    """``first`` submitted and its group sent, then ``rest`` submitted behind it."""
    head = asyncio.create_task(commit.submit(first))
    await _spin()
    tail = [asyncio.create_task(commit.submit(x)) for x in rest]
    await _spin()
    return head, tail


async def test_items_waiting_behind_a_group_go_together() -> None:
    writer = Writer()
    commit: GroupCommit[str] = GroupCommit(writer, max_in_flight=1)
    first, rest = await _behind(commit, b"a", (b"b", b"c", b"d"))
    writer.release.set()
    assert await first == "A"
    assert [await t for t in rest] == ["B", "C", "D"]
    assert writer.groups == [[b"a"], [b"b", b"c", b"d"]]
    assert (commit.groups, commit.items) == (2, 4)


async def test_max_items_and_max_bytes_split_groups() -> None:
    writer = Writer()
    writer.release.set()
    commit: GroupCommit[str] = GroupCommit(writer, max_items=2, max_bytes=4, max_in_flight=1)
    results = await asyncio.gather(*(commit.submit(x) for x in (b"aa", b"bb", b"ccc", b"dd")))
    assert results == ["AA", "BB", "CCC", "DD"]
    # the writer starts with everything waiting: 2 items (4 bytes), then 3 (+2 > 4) bytes
    assert writer.groups == [[b"aa", b"bb"], [b"ccc"], [b"dd"]]


async def test_a_refused_group_is_written_again_one_by_one() -> None:
    writer = Writer(refuse=b"dup")
    commit: GroupCommit[str] = GroupCommit(writer, max_in_flight=1)
    first, tasks = await _behind(commit, b"x", (b"y", b"dup", b"z"))
    writer.release.set()
    assert await first == "X"
    assert await tasks[0] == "Y"
    with pytest.raises(asyncpg.UniqueViolationError):
        await tasks[1]
    assert await tasks[2] == "Z"
    assert writer.groups == [[b"x"], [b"y", b"dup", b"z"], [b"y"], [b"dup"], [b"z"]]


async def test_a_lost_connection_fails_the_whole_group_once() -> None:
    writer = Writer(fail=ConnectionResetError("gone"))
    commit: GroupCommit[str] = GroupCommit(writer, max_in_flight=1)
    first, tasks = await _behind(commit, b"x", (b"y", b"z"))
    writer.release.set()
    for task in (first, *tasks):
        with pytest.raises(ConnectionResetError):
            await task
    assert writer.groups == [[b"x"], [b"y", b"z"]]  # not retried one by one


async def test_a_caller_cancelled_before_its_group_is_left_out() -> None:
    writer = Writer()
    commit: GroupCommit[str] = GroupCommit(writer, max_in_flight=1)
    first, (gone, kept) = await _behind(commit, b"x", (b"gone", b"kept"))
    gone.cancel()
    writer.release.set()
    assert await first == "X"
    assert await kept == "KEPT"
    assert writer.groups == [[b"x"], [b"kept"]]


async def test_groups_in_flight_are_bounded() -> None:
    writer = Writer()
    commit: GroupCommit[str] = GroupCommit(writer, max_in_flight=2)
    tasks = [asyncio.create_task(commit.submit(b"a"))]
    await _spin()
    tasks.append(asyncio.create_task(commit.submit(b"b")))
    await _spin()
    assert writer.groups == [[b"a"], [b"b"]]  # two groups in flight, one writer each
    tasks += [asyncio.create_task(commit.submit(x)) for x in (b"c", b"d", b"e")]
    await _spin()
    assert len(writer.groups) == 2  # no third writer: c, d and e wait
    writer.release.set()
    assert [await t for t in tasks] == ["A", "B", "C", "D", "E"]
    assert writer.groups[2] == [b"c", b"d", b"e"]


async def test_an_item_arriving_as_the_last_writer_leaves_is_written() -> None:
    """A writer that found nothing to write is still counted until its done callback;
    an item submitted in between must not be stranded."""
    writer = Writer()
    writer.release.set()
    commit: GroupCommit[str] = GroupCommit(writer, max_in_flight=1)
    assert await commit.submit(b"a") == "A"
    # the writer finished, but its done callback has not run yet: submit in this turn
    async with asyncio.timeout(2):
        assert await commit.submit(b"b") == "B"


def test_refused_by_postgres_sees_through_sqlalchemys_wrapping() -> None:
    driver = asyncpg.UniqueViolationError("duplicate key value")
    try:
        raise IntegrityError("INSERT", {}, driver) from driver
    except IntegrityError as wrapped:
        assert refused_by_postgres(wrapped)
    assert not refused_by_postgres(asyncpg.ConnectionDoesNotExistError("closed"))
    assert not refused_by_postgres(OSError("reset"))


async def test_a_writer_answering_the_wrong_count_fails_its_callers() -> None:
    async def short(items: Sequence[bytes]) -> list[str]:
        return ["only one"]

    commit: GroupCommit[str] = GroupCommit(short, max_in_flight=1)
    tasks = [asyncio.create_task(commit.submit(x)) for x in (b"a", b"b")]
    for task in tasks:
        with pytest.raises(RuntimeError, match="1 results for a group of 2"):
            await asyncio.wait_for(task, 2)
