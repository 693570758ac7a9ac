"""Run-change notices: what they say (status, answer flag, a small answer whole) and how
a process announces them (a run's end and answer at once; other changes delayed and
coalesced, the newest state winning, so every commit is followed by a notice)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from backend.engine.model import RunState
from backend.engine.states import RunStatus
from backend.services.runs.channels import (
    CHANGED,
    NOTICE_VALUES_MAX_BYTES,
    RunNotice,
    decode_notice,
    encode_notice,
)
from backend.services.runs.execution import followups as followups_module
from backend.services.runs.execution.followups import Followups
from backend.services.runs.execution.transition import Env, Followup
from backend.services.runs.execution.writer import RunWriter


class RecordingSink:
    """The EventSink and Dispatcher of a test: records the notices published."""

    def __init__(self) -> None:
        self.published: list[tuple[str, RunNotice | None]] = []

    async def notify(self, run_id: str, notice: bytes = CHANGED) -> None:
        self.published.append((run_id, decode_notice(notice)))


def _writer() -> tuple[RunWriter, RecordingSink]:
    sink = RecordingSink()
    env = cast(Env, type("E", (), {"dispatcher": sink, "events": sink})())
    return RunWriter(env, Followups(env)), sink


def _state(status: RunStatus, **values: Any) -> RunState:
    state = RunState("r1", "w", 1, status, {}, {})
    for name, value in values.items():
        setattr(state, name, value)
    return state


def test_end_notice_carries_a_small_answer_whole() -> None:
    notice = decode_notice(
        encode_notice("succeeded", response=None, output={"text": "hi"}, error=None, final=True)
    )
    assert notice == RunNotice("succeeded", carried=True, output={"text": "hi"})


def test_end_notice_of_a_big_answer_says_only_the_status() -> None:
    big = "x" * (NOTICE_VALUES_MAX_BYTES + 1)
    data = encode_notice("succeeded", response=None, output=big, error=None, final=True)
    assert decode_notice(data) == RunNotice("succeeded")
    assert len(data) < 100


def test_notice_of_a_reference_says_only_the_status() -> None:
    stored = {"$railyard.payload": "ab" * 32, "bytes": 300000}
    data = encode_notice("succeeded", response=None, output=stored, error=None, final=True)
    assert decode_notice(data) == RunNotice("succeeded")


def test_notice_of_a_value_that_does_not_encode_says_only_the_status() -> None:
    data = encode_notice("succeeded", response=None, output={1j}, error=None, final=True)
    assert decode_notice(data) == RunNotice("succeeded")


def test_running_notice_carries_no_values() -> None:
    response = {"status": 201, "headers": {}, "body": {"ok": True}}
    data = encode_notice("running", response=response, output=None, error=None, final=False)
    assert decode_notice(data) == RunNotice("running", answered=True)


def test_bare_changed_notice_decodes_to_none() -> None:
    assert decode_notice(CHANGED) is None
    assert decode_notice(b"{}") is None
    assert decode_notice("not json") is None


async def test_coalesced_notices_still_deliver_the_end() -> None:
    """Three changes within the delay, then the end: the end is published at once and
    the pending "running" notice it supersedes is never published after it."""
    writer, sink = _writer()
    for _ in range(3):
        await writer.after_commit("r1", Followup(), _state(RunStatus.RUNNING))
    assert sink.published == []  # still pending: coalesced into one
    await writer.after_commit("r1", Followup(), _state(RunStatus.SUCCEEDED, output=7))
    assert sink.published == [("r1", RunNotice("succeeded", carried=True, output=7))]
    await writer.followups.drain()
    await asyncio.sleep(followups_module.ANNOUNCE_DELAY_SECONDS * 2)
    assert sink.published == [("r1", RunNotice("succeeded", carried=True, output=7))]


async def test_changes_within_the_delay_make_one_notice_of_the_newest_state() -> None:
    writer, sink = _writer()
    await writer.after_commit("r1", Followup(), _state(RunStatus.QUEUED))
    await writer.after_commit("r1", Followup(), _state(RunStatus.RUNNING))
    await writer.after_commit("r2", Followup(), _state(RunStatus.RUNNING))
    await writer.followups.drain()
    assert sorted(sink.published, key=lambda p: p[0]) == [
        ("r1", RunNotice("running")),
        ("r2", RunNotice("running")),
    ]
    await writer.after_commit("r1", Followup(), _state(RunStatus.WAITING))
    await writer.followups.drain()
    assert sink.published[-1] == ("r1", RunNotice("waiting"))  # a later change: its own


async def test_a_run_s_answer_is_announced_at_once_and_once() -> None:
    writer, sink = _writer()
    response = {"status": 201, "headers": {}, "body": {"got": 2}}
    answered = _state(RunStatus.RUNNING, response=response)
    await writer.after_commit("r1", Followup(), answered)
    carried = RunNotice("running", answered=True, carried=True, response=response)
    assert sink.published == [("r1", carried)]
    await writer.after_commit("r1", Followup(), answered)  # a later step: delayed again
    assert len(sink.published) == 1
    await writer.followups.drain()
    assert sink.published[-1] == ("r1", RunNotice("running", answered=True))


async def test_no_state_announces_changed_after_the_delay() -> None:
    writer, sink = _writer()
    await writer.after_commit("r1", Followup())
    await writer.followups.drain()
    assert sink.published == [("r1", None)]


async def test_no_notice_when_the_followup_says_so() -> None:
    writer, sink = _writer()
    await writer.after_commit("r1", Followup(notify=False), _state(RunStatus.SUCCEEDED))
    await writer.followups.drain()
    assert sink.published == []


async def test_a_process_hears_its_own_notices_without_redis() -> None:
    """LocalNotices hands a notice to this process's waits of the run at once (an eager
    run's end wakes its waiting webhook) and still publishes it for other processes."""
    from redis.asyncio import Redis

    from backend.services.runs.run_watch import LocalNotices, notices_for

    redis = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)  # nothing listens
    sink = RecordingSink()
    events = LocalNotices(sink, redis)
    end = encode_notice("succeeded", response=None, output={"text": "done"}, error=None, final=True)
    await events.notify("r0", end)  # nobody waits here: published only
    async with notices_for(redis).watch("r1") as wait:
        await events.notify("r1", end)
        assert wait.event.is_set()
        [notice] = wait.take()
        assert notice is not None and notice.status == "succeeded" and notice.carried
        assert notice.output == {"text": "done"}
    assert [run_id for run_id, _ in sink.published] == ["r0", "r1"]
    await redis.aclose()
