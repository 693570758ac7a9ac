"""A worker continuing a run inline completes each attempt from the state it wrote with the
claim, in one statement conditional on the run's revision. These tests move the run
(pause, cancel) while such an attempt is in flight: the completion must then take the
locked path and respect what happened, never write over it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink, Recorded
from tests.integration.conftest import wait_for_run
from tests.integration.flows import attempt_rows, publish, run_detail, start_manual, steps_by_id

pytestmark = pytest.mark.integration


def three_calls(url: str) -> dict[str, Any]:
    """manual -> POST /a -> POST /b -> POST /c (each claimed inline after the previous)."""
    return diagram(
        [
            node("start", "trigger.manual"),
            *(node(s, "http.request", method="POST", url=f"{url}/{s}", body="=$") for s in "abc"),
        ],
        [edge("start", "a"), edge("a", "b"), edge("b", "c")],
    )


def hold_b(sink: HttpSink) -> threading.Event:
    """Make the sink hold its answer to /b until the returned event is set (at most 20 s)."""
    release = threading.Event()

    def handler(request: Recorded, _n: int) -> tuple[int, Any]:
        if request.path == "/b":
            release.wait(20)
        return 200, {"path": request.path}

    sink.handler = handler
    return release


async def until_requested(sink: HttpSink, path: str, timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(r.path == path for r in sink.requests):
        assert asyncio.get_running_loop().time() < deadline, f"{path} never requested"
        await asyncio.sleep(0.02)


async def act_while_b_runs(client: httpx.AsyncClient, sink: HttpSink, action: str) -> str:
    """Start a run of :func:`three_calls`, POST ``/api/runs/<id>/<action>`` while /b is
    being answered (held), then let /b answer. Returns the run id."""
    release = hold_b(sink)
    wf = await publish(client, three_calls(sink.url))
    run_id = await start_manual(client, wf, {"n": 1})
    await until_requested(sink, "/b")
    r = await client.post(f"/api/runs/{run_id}/{action}")
    assert r.status_code == 200, r.text
    release.set()
    return run_id


async def test_pause_while_an_inline_attempt_runs_stops_before_the_next_step(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    run_id = await act_while_b_runs(client, sink, "pause")
    # b completes (running attempts finish), c must not start while the run is paused
    deadline = asyncio.get_running_loop().time() + 20
    while steps_by_id(await run_detail(client, run_id))["b"]["status"] != "succeeded":
        assert asyncio.get_running_loop().time() < deadline, "b never completed"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    detail = await run_detail(client, run_id)
    assert detail["status"] == "paused"
    assert steps_by_id(detail)["c"]["status"] in ("pending", "ready")  # not started
    assert [r.path for r in sink.requests] == ["/a", "/b"]
    assert (await client.post(f"/api/runs/{run_id}/resume")).status_code == 200
    assert await wait_for_run(runtime, run_id) == "succeeded"
    assert [r.path for r in sink.requests] == ["/a", "/b", "/c"]
    assert await attempt_rows(runtime, run_id) == [
        ("a", 1, "succeeded", None),
        ("b", 1, "succeeded", None),
        ("c", 1, "succeeded", None),
    ]


async def test_cancel_while_an_inline_attempt_runs_discards_its_completion(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    run_id = await act_while_b_runs(client, sink, "cancel")
    assert await wait_for_run(runtime, run_id) == "cancelled"
    await asyncio.sleep(0.5)  # b's late completion arrives and is discarded
    detail = await run_detail(client, run_id)
    assert detail["status"] == "cancelled"
    assert steps_by_id(detail)["b"]["status"] == "cancelled"
    assert [r.path for r in sink.requests] == ["/a", "/b"]
    assert [row[:3] for row in await attempt_rows(runtime, run_id)] == [
        ("a", 1, "succeeded"),
        ("b", 1, "cancelled"),
    ]
