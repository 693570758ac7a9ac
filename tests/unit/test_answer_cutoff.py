"""The cutoff that ends the answer waits of a stopping API
(backend/services/triggers/answer_cutoff.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backend.services.triggers.answer_cutoff import cut_waits_after, unless_cut


async def test_a_wait_that_ends_first_gives_its_answer() -> None:
    state: dict[str, Any] = {}

    async def answer() -> str:
        return "ok"

    assert await unless_cut(state, answer()) == "ok"


async def test_the_cutoff_ends_a_wait_before_the_grace_and_cancels_it() -> None:
    state: dict[str, Any] = {}
    cancelled = asyncio.Event()

    async def forever() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    loop = asyncio.get_running_loop()
    grace_ends = cut_waits_after(state, 0.5)
    assert await unless_cut(state, forever()) is None
    assert cancelled.is_set()
    assert loop.time() < grace_ends  # the margin leaves time to write the 202
    # a wait that starts after the cutoff ends at once
    assert await unless_cut(state, forever()) is None


async def test_errors_of_the_wait_propagate() -> None:
    async def broken() -> None:
        raise LookupError("no such run")

    with pytest.raises(LookupError):
        await unless_cut({}, broken())


def test_one_cutoff_serves_waits_on_different_event_loops() -> None:
    """An app may serve from more than one event loop (tests do): the cutoff is bound to
    none of them."""
    state: dict[str, Any] = {}

    async def slow_answer() -> str:
        await asyncio.sleep(0.05)
        return "first loop"

    async def forever() -> None:
        await asyncio.Event().wait()

    async def answer_then_cut() -> None:
        assert await unless_cut(state, slow_answer()) == "first loop"  # not cut short
        cut_waits_after(state, 0.2)
        assert await unless_cut(state, forever()) is None

    assert asyncio.run(unless_cut(state, slow_answer())) == "first loop"
    asyncio.run(answer_then_cut())
