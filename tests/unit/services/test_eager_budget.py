"""The eager-run budget of a process (backend/services/runs/execution/eager.py): places are
reserved before the start writes, given back by runs that end or starts that do not use
them, and none is given while the process drains; stopping drains like a worker."""

from __future__ import annotations

import asyncio

from backend.services.runs.draining import Drain
from backend.services.runs.execution.eager import EagerRuns


def test_reserve_stops_at_the_limit_and_release_gives_a_place_back() -> None:
    eager = EagerRuns(Drain(), limit=2)
    assert eager.reserve() and eager.reserve()
    assert not eager.reserve()  # full
    eager.release()
    assert eager.reserve()


def test_a_limit_of_zero_turns_eager_runs_off() -> None:
    assert not EagerRuns(Drain(), limit=0).reserve()


def test_no_place_while_the_process_drains() -> None:
    drain = Drain()
    eager = EagerRuns(drain, limit=4)
    drain.begin()
    assert not eager.reserve()


async def test_a_run_that_ends_gives_its_place_back() -> None:
    eager = EagerRuns(Drain(), limit=1)
    assert eager.reserve()
    done = asyncio.Event()

    async def run() -> None:
        await done.wait()

    eager.spawn(run(), "r1")
    assert eager.running() == 1 and not eager.reserve()
    done.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert eager.running() == 0
    assert eager.reserve()


async def test_a_failing_run_gives_its_place_back_too() -> None:
    eager = EagerRuns(Drain(), limit=1)
    assert eager.reserve()

    async def run() -> None:
        raise RuntimeError("database gone")

    eager.spawn(run(), "r1")
    await eager.stop(grace_seconds=1)
    assert eager.running() == 0


async def test_stop_hands_back_what_outlasts_the_grace() -> None:
    drain = Drain()
    eager = EagerRuns(drain, limit=2)
    stopped = asyncio.Event()

    async def attempt() -> None:  # an attempt that stops when handed back
        unregister = drain.register(1, stopped.set)
        try:
            await stopped.wait()
        finally:
            unregister()

    assert eager.reserve()
    eager.spawn(attempt(), "r1")
    await asyncio.sleep(0)
    cancelled = await eager.stop(grace_seconds=0.01)
    assert cancelled == []  # handed back, not cancelled
    assert drain.handed_back(1)
    assert not eager.reserve()  # drained: no new eager run
