"""Case replay-never-repeats-completed-calls: a call that completed after another branch
failed the run is shown succeeded with its output, and neither a replay nor a re-run
calls it again.

Webhook -> Prepare (Set) -> A (HTTP call answering 500 at once while ``qty`` <= 0) and, in
parallel, Webhook -> B ("charge the card", answering 200 only once the run has failed,
so its call is in flight when A fails the run); A + B -> Join. One delivery. Then a
replay from Prepare (upstream of A, not of B) with ``qty`` edited, and a re-run from the
failed step. Prepare stands between the trigger and A so that a step upstream of A is not
upstream of B: a replay from the trigger itself changes every step's input, B's too.
"""

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
from tests.integration.flows import publish, run_detail, step_attempts, steps_by_id

pytestmark = pytest.mark.integration


def _case(a_url: str, b_url: str) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("prepare", "control.set", mapping={"qty": "=body.qty"}),
            node("a", "http.request", method="POST", url=a_url, body="=$"),
            node("b", "http.request", method="POST", url=b_url, body="=body"),
            node("join", "control.join", mode="all"),
        ],
        [
            edge("hook", "prepare"),
            edge("prepare", "a"),
            edge("hook", "b"),
            edge("a", "join"),
            edge("b", "join"),
        ],
    )


async def _wait_attempt_closed(runtime: Runtime, run_id: str, step_id: str) -> list[Any]:
    """The attempts of ``step_id`` once none is running any more."""
    for _ in range(400):
        rows = await step_attempts(runtime, run_id, step_id)
        if rows and all(r[1] != "running" for r in rows):
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"{step_id}'s attempt is still running")


async def test_replay_never_repeats_completed_calls(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    charging = threading.Event()
    run_failed = threading.Event()

    def remote_a(request: Recorded, n: int) -> tuple[int, Any]:
        charging.wait(30)  # A answers once B's call is in flight
        qty = request.json().get("qty", 0)
        return (500, {"error": "out of stock"}) if qty <= 0 else (200, {"reserved": qty})

    def charge(request: Recorded, n: int) -> tuple[int, Any]:
        charging.set()
        run_failed.wait(30)  # the card is charged while the run fails on the other branch
        return 200, {"charge_id": f"ch_{n}", "amount": request.json()["amount"]}

    a = HttpSink(handler=remote_a).start()
    b = HttpSink(handler=charge).start()
    try:
        wf = await publish(client, _case(a.url, b.url))
        r = await client.post(wf["webhook_path"], json={"qty": 0, "amount": 42})
        assert r.status_code in (200, 202), r.text
        original = r.json()["run_id"]
        assert await wait_for_run(runtime, original) == "failed"
        run_failed.set()

        # B's call completed at the remote end: its attempt and its step say so
        assert [row[1] for row in await _wait_attempt_closed(runtime, original, "b")] == [
            "succeeded"
        ]
        detail = await run_detail(client, original)
        assert detail["status"] == "failed" and detail["error"]["step_id"] == "a"
        steps = steps_by_id(detail)
        assert steps["b"]["status"] == "succeeded", steps["b"]
        assert steps["b"]["output"]["body"] == {"charge_id": "ch_1", "amount": 42}
        assert steps["a"]["status"] == "failed"
        assert steps["join"]["status"] != "succeeded"
        charged = steps["b"]["output"]

        # replay from Prepare (upstream of A only) with qty edited: A now succeeds, B's
        # recorded output feeds the Join, B is not called again
        r = await client.post(
            f"/api/runs/{original}/replay",
            json={"step_id": "prepare", "input": {"body": {"qty": 3, "amount": 42}}},
        )
        assert r.status_code == 201, r.text
        replay = r.json()["run_id"]
        assert await wait_for_run(runtime, replay) == "succeeded"
        replayed = steps_by_id(await run_detail(client, replay))
        assert replayed["b"]["status"] == "succeeded" and replayed["b"]["output"] == charged
        assert replayed["b"]["attempts"] == []
        assert replayed["join"]["output"]["b"] == charged
        assert replayed["a"]["output"]["body"] == {"reserved": 3}

        # re-run from the failed step: A runs again (and fails again), B is reused
        r = await client.post(f"/api/runs/{original}/rerun", json={"from": "failed_step"})
        assert r.status_code == 201, r.text
        rerun = r.json()["run_id"]
        assert await wait_for_run(runtime, rerun) == "failed"
        rerun_steps = steps_by_id(await run_detail(client, rerun))
        assert rerun_steps["b"]["status"] == "succeeded"
        assert rerun_steps["b"]["output"] == charged and rerun_steps["b"]["attempts"] == []

        # the card was charged exactly once; A was called by each of the three runs
        assert len(b.requests) == 1
        assert len(a.requests) == 3
        # the original run is unchanged by its replay and re-run
        after = await run_detail(client, original)
        assert {k: after[k] for k in ("status", "error", "output", "input")} == {
            k: detail[k] for k in ("status", "error", "output", "input")
        }
        assert steps_by_id(after) == steps
    finally:
        charging.set()
        run_failed.set()
        a.stop()
        b.stop()
