"""Run control and error handling through the API on PostgreSQL, Redis and an arq worker:
step and run timeouts, concurrency limit, re-run, workflow settings, error port,
continue on error and the error workflow."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.runs.execution import active_version_of
from backend.services.runs.recovery import sweep
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink, Recorded
from tests.integration.conftest import wait_for_run
from tests.integration.fake_clock import FakeClock
from tests.integration.flows import (
    attempt_rows,
    publish,
    run_detail,
    set_settings,
    start_manual,
    steps_by_id,
)

pytestmark = pytest.mark.integration


def call_then_set(url: str, **call_config: Any) -> dict[str, Any]:
    """manual -> HTTP POST ``url`` -> Set ``{"after": true}``."""
    return diagram(
        [
            node("start", "trigger.manual"),
            node("call", "http.request", method="POST", url=url, body="=$", **call_config),
            node("after", "control.set", mapping={"after": True}),
        ],
        [edge("start", "call"), edge("call", "after")],
    )


async def test_step_timeout_is_retried_then_fails_and_nothing_downstream_starts(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    sink.delay = 3.0
    retry = {"max_attempts": 2, "initial_interval": 0.1, "jitter": 0}
    wf = await publish(client, call_then_set(sink.url, timeout=0.4, retry=retry))
    run_id = await start_manual(client, wf, {"n": 1})
    assert await wait_for_run(runtime, run_id) == "failed"
    assert await attempt_rows(runtime, run_id) == [
        ("call", 1, "failed", "timeout"),
        ("call", 2, "failed", "timeout"),
    ]
    steps = steps_by_id(await run_detail(client, run_id))
    assert steps["call"]["error"]["kind"] == "timeout"
    assert steps["call"]["error"]["message"] == "step timed out after 0.4 s"
    assert steps["after"]["status"] in ("pending", "not_run")


async def test_run_timeout_cancels_the_running_step_and_starts_nothing_downstream(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    sink.delay = 4.0  # still running when the run times out
    wf = await publish(client, call_then_set(sink.url))
    assert await set_settings(client, wf, run_timeout_seconds=1.5) == {"run_timeout_seconds": 1.5}
    run_id = await start_manual(client, wf, {})
    detail = await run_detail(client, run_id)
    assert detail["deadline_at"] is not None
    for _ in range(100):  # wait until the worker has claimed the call
        if await attempt_rows(runtime, run_id):
            break
        await asyncio.sleep(0.05)
    assert await sweep(runtime.execution.recovery, grace_seconds=60) == {
        "expired": 0,
        "redispatched": 0,
        "started": 0,
        "woken": 0,
        "timed_out": 0,
    }
    # 1.5 s leave the first sweep room before the deadline on a loaded machine
    await asyncio.sleep(1.6)
    counts = await sweep(runtime.execution.recovery, grace_seconds=60)
    assert counts["timed_out"] == 1
    assert await wait_for_run(runtime, run_id) == "timed_out"
    await asyncio.sleep(2.6)  # the slow call returns: its completion is discarded
    detail = await run_detail(client, run_id)
    assert detail["status"] == "timed_out"
    assert detail["error"] == {"message": "run timed out after 1.5 s", "kind": "timeout"}
    steps = steps_by_id(detail)
    assert steps["call"]["status"] == "cancelled"
    assert steps["after"]["status"] == "not_run"  # never runs
    assert await attempt_rows(runtime, run_id) == [("call", 1, "cancelled", None)]
    page = await client.get(f"/runs/{run_id}")
    assert "Timed out: run timed out after 1.5 s" in page.text


async def test_concurrency_limit_queues_runs_and_starts_them_in_creation_order(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(
        client,
        diagram(
            [
                node("hook", "trigger.webhook"),
                node("nap", "control.delay", seconds=0.3),
                node("after", "control.set", mapping={"n": "=$trigger.body.n"}),
            ],
            [edge("hook", "nap"), edge("nap", "after")],
        ),
    )
    await set_settings(client, wf, max_concurrent_runs=1)
    answers = [await client.post(wf["webhook_path"], json={"n": n}) for n in range(4)]
    assert [a.status_code for a in answers] == [202] * 4
    assert [a.json()["status"] for a in answers] == ["waiting", "queued", "queued", "queued"]
    ids = [a.json()["run_id"] for a in answers]
    for run_id in ids:
        assert await wait_for_run(runtime, run_id) == "succeeded"
    details = [await run_detail(client, run_id) for run_id in ids]
    assert [d["output"] for d in details] == [{"n": n} for n in range(4)]
    for earlier, later in itertools.pairwise(details):
        assert later["started_at"] >= earlier["finished_at"]


async def test_sweeper_starts_queued_runs_when_a_slot_is_free(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("set", "control.set", mapping={"ok": True})],
            [edge("start", "set")],
        ),
    )
    await set_settings(client, wf, max_concurrent_runs=1)
    # A run stuck queued (e.g. its admission was lost with a crashed process)
    async with runtime.engine.begin() as conn:
        await conn.execute(
            text(
                "insert into runs (id, workflow_id, version_id, version_number, status, trigger,"
                " input, created_at) select gen_random_uuid(), workflow_id, id, number, 'queued',"
                " 'manual', '{}'::jsonb, now() - interval '1 minute' from workflow_versions"
                " where workflow_id = :wf"
            ),
            {"wf": wf["id"]},
        )
    counts = await sweep(runtime.execution.recovery, grace_seconds=1)
    assert counts["started"] == 1
    async with runtime.engine.connect() as conn:
        statuses = (await conn.execute(text("select status from runs"))).scalars().all()
    assert statuses == ["succeeded"]


async def test_rerun_from_failed_step_and_from_start(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    calls: list[Any] = []

    def fail_first(request: Recorded, n: int) -> tuple[int, Any]:
        calls.append(request.json())
        return (400, {"error": "bad"}) if n == 1 else (200, {"call": n})

    sink.handler = fail_first
    d = diagram(
        [
            node("start", "trigger.manual"),
            node("prep", "control.set", mapping={"v": "=v", "tag": "one"}),
            node("call", "http.request", method="POST", url=sink.url, body="=$"),
            node("after", "control.set", mapping={"done": "=body.call"}),
        ],
        [edge("start", "prep"), edge("prep", "call"), edge("call", "after")],
    )
    wf = await publish(client, d)
    run_id = await start_manual(client, wf, {"v": 7})
    assert await wait_for_run(runtime, run_id) == "failed"
    original = await run_detail(client, run_id)

    r = await client.post(f"/api/runs/{run_id}/rerun", json={"from": "failed_step"})
    assert r.status_code == 201, r.text
    again = r.json()["run_id"]
    assert await wait_for_run(runtime, again) == "succeeded"
    detail = await run_detail(client, again)
    assert detail["rerun_of"] == run_id and detail["trigger"] == "rerun"
    assert detail["version_number"] == 1
    assert detail["output"] == {"done": 2}
    steps, before = steps_by_id(detail), steps_by_id(original)
    assert steps["prep"]["output"] == before["prep"]["output"]
    assert steps["prep"]["finished_at"] == before["prep"]["finished_at"]  # copied, not re-run
    assert [a["status"] for a in steps["call"]["attempts"]] == ["succeeded"]
    assert (await run_detail(client, run_id))["reruns"] == [again]
    assert calls == [{"v": 7, "tag": "one"}] * 2

    # from the start on the current active version, with the original input
    d["nodes"][1]["config"]["mapping"]["tag"] = "two"
    r = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    assert (await client.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    r = await client.post(f"/api/runs/{run_id}/rerun", json={"from": "start"})
    assert r.status_code == 201, r.text
    fresh = r.json()["run_id"]
    assert await wait_for_run(runtime, fresh) == "succeeded"
    detail = await run_detail(client, fresh)
    assert detail["version_number"] == 2 and detail["input"] == {"v": 7}
    assert calls[-1] == {"v": 7, "tag": "two"}

    # bad requests
    r = await client.post(f"/api/runs/{fresh}/rerun", json={"from": "failed_step"})
    assert r.status_code == 409 and "succeeded" in r.json()["detail"]
    r = await client.post(f"/api/runs/{run_id}/rerun", json={"from": "middle"})
    assert r.status_code == 400 and r.json()["field"] == "from"
    page = await client.get(f"/runs/{run_id}")
    assert 'data-rerun="failed_step"' in page.text and f'href="/runs/{again}"' in page.text


async def test_workflow_settings_are_validated(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = (await client.post("/api/workflows", json={"name": "Main"})).json()
    other = (await client.post("/api/workflows", json={"name": "On error"})).json()
    assert wf["settings"] == {}
    bad = [
        ({"run_timeout_seconds": 0}, "settings.run_timeout_seconds"),
        ({"run_timeout_seconds": "5"}, "settings.run_timeout_seconds"),
        ({"max_concurrent_runs": 1.5}, "settings.max_concurrent_runs"),
        ({"max_concurrent_runs": 0}, "settings.max_concurrent_runs"),
        ({"error_workflow_id": wf["id"]}, "settings.error_workflow_id"),
        ({"error_workflow_id": "nope"}, "settings.error_workflow_id"),
        (
            {"error_workflow_id": "6f1d0f52-0000-4000-8000-000000000000"},
            "settings.error_workflow_id",
        ),
        ({"colour": "red"}, "settings.colour"),
    ]
    for settings, field in bad:
        r = await client.patch(f"/api/workflows/{wf['id']}", json={"settings": settings})
        assert r.status_code == 400, (settings, r.text)
        assert r.json()["field"] == field
    good = {"error_workflow_id": other["id"], "run_timeout_seconds": 90, "max_concurrent_runs": 3}
    assert await set_settings(client, wf, **good) == good
    assert await set_settings(client, wf, max_concurrent_runs=None) == {
        "error_workflow_id": other["id"],
        "run_timeout_seconds": 90,
    }
    assert (await client.get(f"/api/workflows/{wf['id']}")).json()["settings"][
        "run_timeout_seconds"
    ] == 90


async def test_error_port_runs_the_error_branch_with_the_error_as_input(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    sink.status = 500
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("call", "http.request", url=sink.url, on_error="error_port"),
                node("ok", "control.set", mapping={"ok": True}),
                node("handled", "control.set", mapping={"kind": "=error.kind", "was": "=input"}),
            ],
            [edge("start", "call"), edge("call", "ok"), edge("call", "handled", "error")],
        ),
    )
    run_id = await start_manual(client, wf, {"x": 1})
    assert await wait_for_run(runtime, run_id) == "succeeded"
    detail = await run_detail(client, run_id)
    steps = steps_by_id(detail)
    assert steps["call"]["status"] == "failed" and steps["call"]["ports"] == ["error"]
    assert steps["ok"]["status"] == "skipped"
    assert steps["handled"]["input"]["error"]["kind"] == steps["call"]["error"]["kind"]
    assert detail["output"] == {"kind": steps["call"]["error"]["kind"], "was": {"x": 1}}


async def test_continue_on_error_passes_the_error_downstream(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    sink.status = 404
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("call", "http.request", url=sink.url, on_error="continue"),
                node("next", "control.set", mapping={"failed": "=$exists(error)"}),
            ],
            [edge("start", "call"), edge("call", "next")],
        ),
    )
    run_id = await start_manual(client, wf, {})
    assert await wait_for_run(runtime, run_id) == "succeeded"
    detail = await run_detail(client, run_id)
    assert steps_by_id(detail)["call"]["status"] == "succeeded"
    assert steps_by_id(detail)["call"]["error"] is not None
    assert detail["output"] == {"failed": True}


def failing(message: str) -> dict[str, Any]:
    return diagram(
        [node("start", "trigger.manual"), node("boom", "control.stop_error", message=message)],
        [edge("start", "boom")],
    )


async def _error_run_of(client: httpx.AsyncClient, run_id: str) -> str:
    """The id of the error workflow's run that failed run ``run_id`` started (waited for
    up to 5 s)."""
    for _ in range(100):
        error_run = (await run_detail(client, run_id))["error_run_id"]
        if error_run:
            return str(error_run)
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} started no error workflow")


async def test_error_workflow_gets_the_failed_run_context_and_never_recurses(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    # The error workflow itself fails; its own error workflow must not start for that.
    fallback = await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("note", "control.set", mapping={"ctx": "=$"})],
            [edge("start", "note")],
        ),
    )
    handler = await publish(client, failing("handler broke too"))
    await set_settings(client, handler, error_workflow_id=fallback["id"])
    main = await publish(client, failing("boom"))
    await client.patch(f"/api/workflows/{main['id']}", json={"name": "Main flow"})
    await set_settings(client, main, error_workflow_id=handler["id"])

    run_id = await start_manual(client, main, {"order": 9})
    assert await wait_for_run(runtime, run_id) == "failed"
    error_run = await _error_run_of(client, run_id)
    assert await wait_for_run(runtime, error_run) == "failed"
    detail = await run_detail(client, error_run)
    assert detail["trigger"] == "error" and detail["workflow_id"] == handler["id"]
    assert detail["input"] == {
        "run_id": run_id,
        "workflow_id": main["id"],
        "workflow_name": "Main flow",
        "status": "failed",
        "error": {"step_id": "boom", "message": "boom", "kind": "stop_error", "field": None},
        "failed_step": "boom",
        "input": {"order": 9},
        "url": f"http://testserver.local/runs/{run_id}",
    }
    await asyncio.sleep(0.5)
    async with runtime.engine.connect() as conn:
        by_workflow = dict(
            (
                await conn.execute(text("select workflow_id::text, count(*) from runs group by 1"))
            ).all()
        )
    assert by_workflow == {main["id"]: 1, handler["id"]: 1}  # the fallback never ran


async def test_the_error_workflow_of_a_calling_run_gets_its_large_input_whole(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """A run that calls other workflows keeps its large input parts by reference
    (backend/services/runs/execution/parent_parts.py); its error workflow's context
    holds the same reference, read back in full, not a reference-shaped object."""
    handler = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("note", "control.set", mapping={"count": "=$count(input.items)"}),
            ],
            [edge("start", "note")],
        ),
    )
    body = await publish(client, failing("body broke"))
    main = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("call", "control.subworkflow", workflow_id=body["id"]),
            ],
            [edge("start", "call")],
        ),
    )
    await set_settings(client, main, error_workflow_id=handler["id"])
    items = [{"n": i, "pad": "p" * 100} for i in range(200)]  # 22 kB: by reference
    run_id = await start_manual(client, main, {"items": items})
    assert await wait_for_run(runtime, run_id) == "failed"
    error_run = await _error_run_of(client, run_id)
    assert await wait_for_run(runtime, error_run) == "succeeded"
    detail = await run_detail(client, error_run)
    assert detail["output"] == {"count": 200}


async def _start_rows(runtime: Runtime, run_id: Any) -> dict[str, Any]:
    """What a start wrote, with instants relative to the run's creation (seconds)."""
    async with runtime.engine.connect() as conn:
        run = (
            (
                await conn.execute(
                    text(
                        "select status, trigger, input, rerun_of::text,"
                        " extract(epoch from started_at - created_at) as started,"
                        " extract(epoch from deadline_at - created_at) as deadline"
                        " from runs where id = :id"
                    ),
                    {"id": run_id},
                )
            )
            .mappings()
            .one()
        )
        steps = (
            await conn.execute(
                text(
                    "select step_id, status, ports, input, output, error, attempts, data,"
                    " extract(epoch from not_before - (select created_at from runs r"
                    " where r.id = run_id)) from step_runs where run_id = :id order by step_id"
                ),
                {"id": run_id},
            )
        ).all()
        events = (
            await conn.execute(
                text("select kind, step_id, data from events where run_id = :id order by id"),
                {"id": run_id},
            )
        ).all()
    return {"run": dict(run), "steps": [tuple(s) for s in steps], "events": events}


async def test_fast_start_writes_what_the_transactional_start_writes(
    client: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start without a concurrency limit is one statement; it must store the same run,
    step records (a timer's due time included), run deadline and events as the
    transactional start that admission takes under a limit."""
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("shape", "control.set", mapping={"n": "=$.n"}),
                node("nap", "control.delay", seconds=60),
                node("after", "control.set", mapping={"done": True}),
            ],
            [edge("start", "shape"), edge("shape", "nap"), edge("nap", "after")],
        ),
    )
    await set_settings(client, wf, run_timeout_seconds=30)
    execution = runtime.execution
    # without a limit the start is the one statement; with one, the locked start (the
    # path follows from the settings alone, so no spy is needed to know which ran)
    monkeypatch.setattr(execution, "clock", FakeClock(datetime.now(UTC)))
    async with runtime.sessionmaker() as session:
        version = await active_version_of(session, uuid.UUID(wf["id"]))
    assert version is not None
    fast = await execution.start_run(version, {"n": 1}, trigger="manual")
    await set_settings(client, wf, max_concurrent_runs=100)
    slow = await execution.start_run(version, {"n": 1}, trigger="manual")
    assert fast.status == slow.status == "waiting"
    rows = await _start_rows(runtime, fast.run_id)
    assert rows == await _start_rows(runtime, slow.run_id)
    assert rows["run"]["deadline"] == 30 and rows["run"]["started"] == 0
    assert [s[0] for s in rows["steps"] if s[1] == "ready"] == ["nap"]
    assert [e[0] for e in rows["events"]][:2] == ["run.created", "run.started"]
