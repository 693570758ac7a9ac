"""Case ``api-loop-not-stalled-by-webhooks``: anonymous webhook callers cannot stall the
API for everyone (issue 29, finding 3).

A webhook's run evaluated its first inline steps on the API's event loop, each up to the
expression budget (one second): eight 1 MB posts to a Set sorting with a custom
comparator made an unrelated list request wait up to 8.9 s. Now an inline step evaluated
where a start was asked for is held to the loop's slice (backend/engine/
expression_slice.py): past it the step is left ready and a worker evaluates it with the
whole budget, and the workflow's version evaluates nothing on the loop for a while (the
per-workflow limit). What this test checks is that mechanism, deterministically: no
evaluation of the heavy expression ever completed, or reached the budget, on the loop.
The latency it buys is measured by bench/api_loop.py (speed is never a timed assertion).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import httpx
import msgspec
import pytest
import structlog

from backend.engine import expressions
from backend.engine.expression_slice import current_slice
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail

pytestmark = pytest.mark.integration

SORT = "$sort(body.items, function($a, $b) { $a > $b })"
CLIENTS = 8


def _body() -> bytes:
    """About 1 MB: 140,000 numbers."""
    numbers = [random.randrange(100_000, 999_999) for _ in range(140_000)]
    body = msgspec.json.encode({"items": numbers})
    assert 900_000 < len(body) <= 1024 * 1024
    return body


async def test_api_loop_not_stalled_by_webhooks(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # per evaluation of the sort: (in an API request, held to the loop's slice, outcome)
    seen: list[tuple[bool, bool, str]] = []
    evaluate = expressions.CompiledExpression.evaluate

    def recording(self: expressions.CompiledExpression, *args: Any, **kwargs: Any) -> Any:
        if self.source != SORT:
            return evaluate(self, *args, **kwargs)
        on_api = "request_id" in structlog.contextvars.get_contextvars()
        sliced = current_slice() is not None
        try:
            result = evaluate(self, *args, **kwargs)
        except expressions.ExpressionError as err:
            seen.append((on_api, sliced, f"stopped: {err.limit}"))
            raise
        seen.append((on_api, sliced, "completed"))
        return result

    monkeypatch.setattr(expressions.CompiledExpression, "evaluate", recording)
    wf = await publish(
        client,
        diagram(
            [
                node("hook", "trigger.webhook"),
                node("sort", "control.set", mapping={"s": "=" + SORT}),
            ],
            [edge("hook", "sort")],
        ),
    )
    anonymous = httpx.AsyncClient(transport=client._transport, base_url=str(client.base_url))
    headers = {"content-type": "application/json"}
    async with anonymous:
        answers = await asyncio.gather(
            *(
                anonymous.post(wf["webhook_path"], content=_body(), headers=headers)
                for _ in range(CLIENTS)
            )
        )
        assert [a.status_code for a in answers] == [202] * CLIENTS, [a.text for a in answers]
        on_loop = [(sliced, outcome) for api, sliced, outcome in seen if api]
        # the loop never completed the sort nor spent its budget on it: each attempt was
        # held to the slice and stopped there, at most one per request before the version
        # was known as heavy
        assert on_loop and set(on_loop) == {(True, "stopped: time")}, on_loop
        assert len(on_loop) <= CLIENTS
        before = len(seen)
        late = await anonymous.post(wf["webhook_path"], content=_body(), headers=headers)
        assert late.status_code == 202
        assert [api for api, _, _ in seen[before:] if api] == []  # heavy: nothing on the loop
    run_ids = [a.json()["run_id"] for a in [*answers, late]]
    for run_id in run_ids:  # a worker evaluated each: sorted, or failed at the budget
        status = await wait_for_run(runtime, run_id, timeout=60)
        step = next(
            s for s in (await run_detail(client, run_id))["steps"] if s["step_id"] == "sort"
        )
        if status == "failed":
            assert "time limit of 1000 ms" in step["error"]["message"], step["error"]
        else:
            assert status == "succeeded" and len(step["output"]["s"]) == 140_000
    assert all(not sliced for api, sliced, _ in seen if not api)  # the worker: whole budget
    assert sum(1 for api, _, _ in seen if not api) >= len(run_ids)
