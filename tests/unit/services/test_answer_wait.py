"""The waiting webhook's use of run notices (backend/services/runs/run_watch.py): which notices
lead to a read of the run, which answer by themselves, and when the first read is skipped.
The read of the run is replaced by a scripted one; notices are handed in directly."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, cast

import pytest

from backend.services.runs import run_watch
from backend.services.runs.channels import decode_notice, encode_notice
from backend.services.runs.run_watch import NoticeWait

RUN = uuid.UUID("00000000-0000-4000-8000-000000000001")


class ScriptedReads:
    """Stands in for the read of the run: returns ``fields`` (status, response, error,
    output) and counts the reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *fields: Any) -> None:
        self.fields = fields
        self.count = 0
        self._counted = asyncio.Condition()

        async def read(sessionmaker: Any, run_id: uuid.UUID, last_step: bool) -> Any:
            assert run_id == RUN
            async with self._counted:
                self.count += 1
                self._counted.notify_all()
            return self.fields

        monkeypatch.setattr(run_watch, "_answer_fields", read)

    async def reached(self, count: int) -> None:
        """Return once ``count`` reads were made."""
        async with self._counted:
            await self._counted.wait_for(lambda: self.count >= count)


def _notice(status: str, *, output: Any = None, response: Any = None, final: bool = True) -> Any:
    data = encode_notice(status, response=response, output=output, error=None, final=final)
    return decode_notice(data)


async def _wait(wait: NoticeWait, *, last_step: bool = True, started: str = "running") -> Any:
    return await run_watch.wait_for_answer(
        cast(Any, None),
        cast(Any, None),
        RUN,
        5,
        last_step=last_step,
        watched=wait,
        started_status=started,
    )


async def test_carried_end_answers_without_any_read(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = ScriptedReads(monkeypatch, "running", None, None, None)
    wait = NoticeWait()
    wait.put(_notice("running", final=False))
    wait.put(_notice("succeeded", output={"text": "done"}))
    assert await _wait(wait) == {"status": 200, "headers": {}, "body": {"text": "done"}}
    assert reads.count == 0  # subscribed before the run was stored: no first read


async def test_notices_that_cannot_answer_are_not_followed_by_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads = ScriptedReads(monkeypatch, "running", None, None, None)
    wait = NoticeWait()
    task = asyncio.create_task(_wait(wait))
    for _ in range(3):
        wait.put(_notice("running", final=False))
        await asyncio.sleep(0)
    wait.put(_notice("failed"))
    answer = await task
    assert answer is not None and answer["status"] == 500
    assert answer["body"]["status"] == "failed"
    assert reads.count == 0


async def test_end_without_the_answer_reads_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """An end notice that does not carry the answer (a big one) means one read."""
    reads = ScriptedReads(monkeypatch, "succeeded", None, None, "x" * 9000)
    wait = NoticeWait()
    wait.put(_notice("succeeded", output="x" * 9000))
    answer = await _wait(wait)
    assert answer == {"status": 200, "headers": {}, "body": "x" * 9000}
    assert reads.count == 1


async def test_a_notice_that_does_not_say_means_a_read(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = ScriptedReads(monkeypatch, "succeeded", None, None, 4)
    wait = NoticeWait()
    wait.put(None)  # e.g. the bare "changed" of an older publisher
    assert await _wait(wait) == {"status": 200, "headers": {}, "body": 4}
    assert reads.count == 1


async def test_no_notice_polls_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lost end notice costs the poll, never the answer."""
    monkeypatch.setattr(run_watch, "POLL_SECONDS", 0.01)
    reads = ScriptedReads(monkeypatch, "running", None, None, None)
    task = asyncio.create_task(_wait(NoticeWait()))
    await reads.reached(2)
    reads.fields = ("succeeded", None, None, "late")
    assert await task == {"status": 200, "headers": {}, "body": "late"}


async def test_a_run_that_started_ended_is_read_first(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = ScriptedReads(monkeypatch, "succeeded", None, None, "inline")
    assert await _wait(NoticeWait(), started="succeeded") == {
        "status": 200,
        "headers": {},
        "body": "inline",
    }
    assert reads.count == 1


async def test_respond_mode_always_reads_first_and_answers_from_the_answer_notice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In ``respond_node`` mode the start may already hold the answer (a Respond step run
    inline): the first read is kept; a later answer notice answers by itself."""
    reads = ScriptedReads(monkeypatch, "running", None, None, None)
    wait = NoticeWait()
    task = asyncio.create_task(_wait(wait, last_step=False))
    await reads.reached(1)
    response = {"status": 201, "headers": {}, "body": {"got": 1}}
    wait.put(_notice("running", response=response))
    assert await task == response
    assert reads.count == 1
