"""The dashboard over real runs: per-minute counts by outcome, success rate, duration
percentiles, slowest and most-failing workflows, queue and workers, retention; links go to
the matching runs."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.operations import dashboard, retention
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.rbac import client_as

pytestmark = pytest.mark.integration


async def burst(
    client: httpx.AsyncClient, runtime: Runtime, name: str, mapping: Any, n: int
) -> str:
    """Publish a manual workflow with one Set step and run it ``n`` times; its id."""
    d = diagram(
        [node("start", "trigger.manual"), node("set_1", "control.set", mapping=mapping)],
        [edge("start", "set_1")],
    )
    wf = (await client.post("/api/workflows", json={"name": name})).json()
    assert (await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})).json()["ok"]
    assert (await client.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    ids = [
        (await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"i": i}})).json()[
            "run_id"
        ]
        for i in range(n)
    ]
    for run_id in ids:
        await wait_for_run(runtime, run_id)
    return str(wf["id"])


async def test_dashboard_shows_the_runs_of_the_window(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, settings: Settings
) -> None:
    ok = await burst(client, runtime, "Order intake", {"total": "=i * 2"}, 6)
    bad = await burst(client, runtime, "Flaky sync", {"x": '=$error("upstream down")'}, 3)
    await retention.run_pass(runtime.sessionmaker, settings)

    board = await dashboard.load(runtime.sessionmaker, runtime.redis, minutes=60)
    assert (board.ended, board.succeeded, board.failed) == (9, 6, 3)
    assert board.success_rate == pytest.approx(6 / 9)
    assert sum(b.total for b in board.per_bucket) == 9
    assert len(board.per_bucket) in (60, 61) and board.bucket_minutes == 1
    p = board.percentiles
    assert p["p50"] is not None and p["p50"] <= p["p95"] <= p["p99"]
    assert {str(w.workflow_id) for w in board.slowest} == {ok, bad}
    assert [(str(w.workflow_id), w.failed, w.runs) for w in board.most_failing] == [(bad, 3, 3)]
    assert board.now.workers == 1 and board.now.queue_depth == 0
    assert {r.data_class for r in board.retention} >= {"runs", "events", "audit"}

    async with runtime.engine.begin() as conn:  # a run started in the minute it ended
        await conn.execute(text("update runs set created_at = date_trunc('minute', finished_at)"))
    page = await client.get("/admin/dashboard?window=60")
    assert page.status_code == 200
    html = page.text
    assert 'class="bar bad"' in html and 'class="bar ok"' in html
    link = f"/search?q=status%3Afailed%2Ctimed_out+workflow%3A{bad}+since%3A60m"
    assert f'href="{link}"' in html
    assert re.search(r'data-figure="ended"><span class="tile-value">9<', html)
    # no scheduler runs in this test (test_scheduler_failover.py names a leading one)
    assert board.leader is None
    assert re.search(r'data-figure="scheduler_leader"><span[^>]*>none<', html)
    assert "66.7%" in html  # the success ring
    assert "style=" not in html.split("<main", 1)[-1]  # strict CSP: no inline styles
    # the link of the most failing workflow finds exactly its failed runs
    found = (await client.get("/api" + link)).json()
    assert found["total"] == 3 and {h["detail"]["workflow_id"] for h in found["hits"]} == {bad}
    assert {h["status"] for h in found["hits"]} == {"failed"}
    # a bar of the runs chart finds the runs of its minute
    bars = re.findall(r'<a href="(/search\?q=status%3Asucceeded[^"]*)"[^>]*><rect', html)
    assert bars and all("after%3A" in b and "before%3A" in b for b in bars)
    in_bars = [(await client.get("/api" + b.replace("&amp;", "&"))).json()["total"] for b in bars]
    assert sum(in_bars) == 6


async def test_dashboard_is_for_admins_and_windows_are_fixed(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings
) -> None:
    r = await client.get("/admin/dashboard?window=7")  # not offered: the default hour
    assert r.status_code == 200 and "Runs that ended in the last 1 hour" in r.text
    assert "No runs ended in this period." in r.text
    async with client_as(settings, runtime, "op@example.com", "operator") as operator:
        assert (await operator.get("/admin/dashboard")).status_code == 403
        assert "/admin/dashboard" not in (await operator.get("/workflows")).text
