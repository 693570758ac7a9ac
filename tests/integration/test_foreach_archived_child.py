"""A For-each whose child workflow is archived while the loop runs: the items already
started finish, the items not yet started are refused (their result says why, with
``on_item_error: continue``; the step fails with ``stop``), and the parent run ends. No
step is left waiting for a child that was never inserted."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

ITEMS = 8


async def _children(runtime: Runtime, run_id: str) -> int:
    async with runtime.engine.connect() as conn:
        found = await conn.execute(
            text("select count(*) from runs where parent_run_id = :id"), {"id": run_id}
        )
        return int(found.scalar_one())


@pytest.mark.parametrize("on_item_error", ["continue", "stop"])
async def test_foreach_child_archived_mid_loop(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, on_item_error: str
) -> None:
    child = await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("nap", "control.delay", seconds=1)],
            [edge("start", "nap")],
        ),
    )
    loop = node(
        "loop",
        "control.foreach",
        items="=items",
        workflow_id=child["id"],
        concurrency=2,
        on_item_error=on_item_error,
    )
    parent = await publish(
        client, diagram([node("start", "trigger.manual"), loop], [edge("start", "loop")])
    )
    r = await client.post(
        f"/api/workflows/{parent['id']}/runs", json={"input": {"items": list(range(ITEMS))}}
    )
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    for _ in range(100):  # the first two children started
        if await _children(runtime, run_id) >= 2:
            break
        await asyncio.sleep(0.1)
    r = await client.delete(f"/api/workflows/{child['id']}")
    assert r.status_code in (200, 204), r.text

    status = await wait_for_run(runtime, run_id, timeout=30)
    step = steps_by_id(await run_detail(client, run_id))["loop"]
    started = await _children(runtime, run_id)
    assert 2 <= started < ITEMS
    if on_item_error == "stop":
        assert status == "failed"
        assert step["status"] == "failed"
        assert step["error"]["kind"] == "item_failed", step["error"]
        assert "has no active version" in step["error"]["message"], step["error"]
        return
    assert status == "succeeded", step
    results = step["output"]
    assert len(results) == ITEMS
    assert all("error" not in r for r in results[:started])
    refused = results[started:]
    assert refused and all("has no active version" in r["error"]["message"] for r in refused)
