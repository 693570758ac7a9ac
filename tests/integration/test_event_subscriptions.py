"""Outgoing event subscriptions end to end (docs/api.md, "Event subscriptions"): real
PostgreSQL, Redis, an arq worker, the scheduler's delivery loop and a local receiver that
verifies every signature with the ``standardwebhooks`` library. Retry durations are
shortened by settings so an outage of a few seconds stands for a long one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import select

from backend.app import create_app
from backend.db.models import AuditLog
from backend.runtime import Runtime, build_runtime
from backend.services.subscriptions import manage
from backend.services.subscriptions.loop import run_event_deliveries
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import login, wait_for_run
from tests.integration.event_receiver import EventReceiver
from tests.integration.flows import start_manual

pytestmark = pytest.mark.integration

RUN_EVENTS = ["run.started", "run.succeeded", "run.failed", "run.timed_out", "run.cancelled"]
ALL_EVENTS = [*RUN_EVENTS, "workflow.published", "workflow.archived"]


def fast(settings: Settings, **changes: Any) -> Settings:
    """``settings`` with retries in tenths of a second instead of minutes."""
    return msgspec.structs.replace(
        settings,
        event_delivery_tick=0.05,
        event_delivery_retry_initial=0.2,
        event_delivery_retry_max=0.8,
        event_delivery_timeout=2.0,
        **changes,
    )


@asynccontextmanager
async def delivering(runtime: Runtime, settings: Settings) -> AsyncIterator[None]:
    """The scheduler's delivery loop, running while inside."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_event_deliveries(runtime.sessionmaker, settings, stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def eventually(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


async def workflow(client: httpx.AsyncClient, *, fail: bool = False) -> dict[str, Any]:
    """A created, unpublished workflow: manual trigger, then a step that succeeds (or
    stops with an error)."""
    wf = (await client.post("/api/v1/workflows", json={"name": "Events"})).json()
    step = (
        node("step", "control.stop_error", message="boom")
        if fail
        else node("step", "control.set", mapping={"n": 1})
    )
    d = diagram([node("start", "trigger.manual"), step], [edge("start", "step")])
    r = await client.put(f"/api/v1/workflows/{wf['id']}/draft", json={"diagram": d})
    assert r.json()["ok"], r.text
    return dict(wf)


async def subscribe(
    client: httpx.AsyncClient, wf: dict[str, Any], url: str, events: list[str] = ALL_EVENTS
) -> dict[str, Any]:
    r = await client.post(
        f"/api/v1/workflows/{wf['id']}/subscriptions", json={"url": url, "events": events}
    )
    assert r.status_code == 201, r.text
    body = dict(r.json())
    assert body["secret"].startswith("whsec_")
    assert r.headers["location"].endswith(f"/subscriptions/{body['id']}")
    return body


async def deliveries(client: httpx.AsyncClient, wf: dict[str, Any], sub: dict[str, Any]) -> Any:
    r = await client.get(
        f"/api/v1/workflows/{wf['id']}/subscriptions/{sub['id']}/deliveries?limit=200"
    )
    assert r.status_code == 200, r.text
    assert r.json()["has_more"] is False
    return r.json()["data"]


async def test_receiver_down_gets_every_event_afterwards_in_order_once(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, worker: Any
) -> None:
    """The receiver is down while a workflow is published and four runs start and end;
    the sender retries with backoff (each attempt logged); once the receiver is back it
    gets every event, signed, in order per run, and none twice; a re-send repeats one
    with the same ``webhook-id``."""
    receiver = EventReceiver()  # not started: down
    wf = await workflow(client)
    sub = await subscribe(client, wf, receiver.url)
    receiver.secret = sub["secret"]
    async with delivering(runtime, fast(settings)):
        assert (await client.post(f"/api/v1/workflows/{wf['id']}/publish")).status_code == 201
        runs = [await start_manual(client, wf, {"k": k}) for k in range(4)]
        for run_id in runs:
            assert await wait_for_run(runtime, run_id) == "succeeded"

        async def failed_attempts() -> bool:
            found = await deliveries(client, wf, sub)
            return len(found) == 9 and all(
                len(d["attempts"]) >= 2 and d["attempts"][0]["error"]
                for d in found
                if d["attempts"]
            )

        await eventually(failed_attempts)
        seen = (await client.get(f"/api/v1/workflows/{wf['id']}/subscriptions/{sub['id']}")).json()
        assert seen["enabled"] and seen["consecutive_failures"] >= 2
        assert receiver.received == []
        receiver.start()
        try:
            await eventually(lambda: len(receiver.acknowledged()) == 9, timeout=30)
            await asyncio.sleep(1.0)  # a few more passes: nothing is sent twice
            acknowledged = receiver.acknowledged()
            assert len(acknowledged) == 9, receiver.dump()
            assert len({r.webhook_id for r in acknowledged}) == 9
            assert receiver.rejected == []
            assert receiver.types_by_run() == {r: ["run.started", "run.succeeded"] for r in runs}
            published = [
                r.payload for r in acknowledged if r.payload["type"] == "workflow.published"
            ]
            assert published[0]["data"]["workflow_id"] == wf["id"]
            assert published[0]["data"]["version"] == 1
            first = next(r.payload for r in acknowledged if r.payload["type"] == "run.succeeded")
            assert first["timestamp"].endswith("Z")
            assert first["data"]["url"] == f"http://testserver.local/runs/{first['data']['run_id']}"
            found = await deliveries(client, wf, sub)
            assert {d["status"] for d in found} == {"delivered"}
            assert all(d["attempts"][0]["status_code"] == 204 for d in found)
            assert all(d["webhook_id"] in {r.webhook_id for r in acknowledged} for d in found)
            seen = (
                await client.get(f"/api/v1/workflows/{wf['id']}/subscriptions/{sub['id']}")
            ).json()
            assert seen["consecutive_failures"] == 0
            again = found[0]
            r = await client.post(
                f"/api/v1/workflows/{wf['id']}/subscriptions/{sub['id']}"
                f"/deliveries/{again['id']}/resend"
            )
            assert r.status_code == 200, r.text
            assert r.json()["acknowledged"] is True
            assert receiver.received[-1].webhook_id == again["webhook_id"]
            log = next(d for d in await deliveries(client, wf, sub) if d["id"] == again["id"])
            assert log["attempts"][0]["manual"] is True
        finally:
            receiver.stop()
    async with runtime.sessionmaker() as session:
        actions = set(
            (
                await session.execute(
                    select(AuditLog.action).where(AuditLog.object_type == "event_subscription")
                )
            ).scalars()
        )
    assert actions == {"event_subscription.create", "event_subscription.resend"}


async def test_failed_and_project_wide_events(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, worker: Any
) -> None:
    """A failed run sends ``run.failed`` with its error; an admin's subscription for
    every workflow gets it too; an archived workflow sends ``workflow.archived``."""
    receiver = EventReceiver().start()
    every = EventReceiver().start()
    try:
        wf = await workflow(client, fail=True)
        sub = await subscribe(client, wf, receiver.url, ["run.failed", "workflow.archived"])
        receiver.secret = sub["secret"]
        r = await client.post(
            "/api/v1/admin/subscriptions", json={"url": every.url, "events": ["run.failed"]}
        )
        assert r.status_code == 201, r.text
        every.secret = r.json()["secret"]
        async with delivering(runtime, fast(settings)):
            assert (await client.post(f"/api/v1/workflows/{wf['id']}/publish")).status_code == 201
            run_id = await start_manual(client, wf, {})
            assert await wait_for_run(runtime, run_id) == "failed"
            assert (await client.delete(f"/api/v1/workflows/{wf['id']}")).status_code in (200, 204)
            await eventually(lambda: len(receiver.acknowledged()) == 2)
            await eventually(lambda: len(every.acknowledged()) == 1)
        # a run's and a workflow's events are ordered apart: either may come first
        failed, archived = sorted((r.payload for r in receiver.acknowledged()), key=_run_first)
        assert failed["type"] == "run.failed"
        assert failed["data"]["status"] == "failed" and failed["data"]["run_id"] == run_id
        assert failed["data"]["error"]["step_id"] == "step"
        assert archived["type"] == "workflow.archived"
        assert every.acknowledged()[0].payload == failed
        r = await client.get("/api/v1/admin/subscriptions")
        assert len(r.json()["data"]) == 2
    finally:
        receiver.stop()
        every.stop()


def _run_first(payload: dict[str, Any]) -> bool:
    return not payload["type"].startswith("run.")


async def test_private_receiver_refused_unless_allowed(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, worker: Any
) -> None:
    """With private addresses not allowed, a subscription to 127.0.0.1 is a 400 naming
    ``url``; allowlisted, it is made; and a delivery to an address the policy refuses at
    send time is a failed attempt saying so, nothing reaching the receiver."""
    receiver = EventReceiver().start()
    strict = fast(settings, http_allow_private=False, http_allowlist=())
    allowing = fast(settings, http_allow_private=False, http_allowlist=("127.0.0.1",))
    try:
        wf = await workflow(client)
        for refused_url in (receiver.url, "http://10.1.2.3/hook", "http://169.254.169.254/latest"):
            async with app_client(strict, runtime) as c:
                r = await c.post(
                    f"/api/v1/workflows/{wf['id']}/subscriptions",
                    json={"url": refused_url, "events": ["run.succeeded"]},
                )
            assert r.status_code == 400, r.text
            problem = r.json()
            assert problem["errors"][0]["pointer"] == "#/url"
            assert problem["detail"].startswith("refusing to connect to ")
        async with app_client(allowing, runtime) as c:
            sub = await subscribe(c, wf, receiver.url, ["run.succeeded"])
        receiver.secret = sub["secret"]
        assert (await client.post(f"/api/v1/workflows/{wf['id']}/publish")).status_code == 201
        run_id = await start_manual(client, wf, {})
        assert await wait_for_run(runtime, run_id) == "succeeded"
        async with delivering(runtime, strict):
            found = await eventually(lambda: _attempted(client, wf, sub))
        assert "refusing to connect to 127.0.0.1" in found[0]["attempts"][0]["error"]
        assert receiver.received == []
        async with delivering(runtime, allowing):
            await eventually(lambda: len(receiver.acknowledged()) == 1)
    finally:
        receiver.stop()


async def _attempted(client: httpx.AsyncClient, wf: dict[str, Any], sub: dict[str, Any]) -> Any:
    found = await deliveries(client, wf, sub)
    return found if found and found[0]["attempts"] else None


@asynccontextmanager
async def app_client(settings: Settings, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """A logged-in admin client of an app whose runtime has ``settings``."""
    own = await build_runtime(settings, pool_size=2)
    try:
        transport = httpx.ASGITransport(app=create_app(settings, own))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
            await login(c)
            yield c
    finally:
        await own.close()


async def test_subscription_disabled_after_consecutive_failures(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings, worker: Any
) -> None:
    """A receiver answering 500 to everything: after ``disable_after`` failed passes the
    subscription is disabled, audited, and its owner sees the notice on the workflows
    page; re-enabling clears the count and the notice."""
    receiver = EventReceiver(status=500).start()
    try:
        wf = await workflow(client)
        sub = await subscribe(client, wf, receiver.url, ["run.started", "run.succeeded"])
        receiver.secret = sub["secret"]
        assert (await client.post(f"/api/v1/workflows/{wf['id']}/publish")).status_code == 201
        run_id = await start_manual(client, wf, {})
        assert await wait_for_run(runtime, run_id) == "succeeded"
        path = f"/api/v1/workflows/{wf['id']}/subscriptions/{sub['id']}"
        async with delivering(runtime, fast(settings, event_subscription_disable_after=3)):
            await eventually(
                lambda: _disabled(client, path),
            )
        seen = (await client.get(path)).json()
        assert seen["consecutive_failures"] == 3 and seen["disabled_reason"]
        assert len(receiver.received) == 3  # the run's first event, tried three times
        async with runtime.sessionmaker() as session:
            rows = (
                await session.execute(
                    select(AuditLog).where(AuditLog.action == "event_subscription.disable")
                )
            ).scalars()
            assert [r.object_id for r in rows] == [sub["id"]]
            owner = await session.scalar(
                select(AuditLog.actor_user_id).where(AuditLog.action == "event_subscription.create")
            )
            assert owner is not None
            notices = await manage.disabled_notices(session, owner)
        assert [str(n["id"]) for n in notices] == [sub["id"]]
        page = await client.get("/workflows")
        assert "disabled" in page.text and receiver.url in page.text
        r = await client.patch(path, json={"enabled": True})
        assert r.status_code == 200 and r.json()["consecutive_failures"] == 0
        assert r.json()["disabled_at"] is None
        assert receiver.url not in (await client.get("/workflows")).text
    finally:
        receiver.stop()


async def _disabled(client: httpx.AsyncClient, path: str) -> bool:
    return not (await client.get(path)).json()["enabled"]


async def test_bad_input_is_refused_with_the_field(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await workflow(client)
    base = f"/api/v1/workflows/{wf['id']}/subscriptions"
    url = "http://127.0.0.1:9/h"
    cases = [
        ({"url": url, "events": ["run.exploded"]}, "#/events/0"),
        ({"url": url, "events": []}, "#/events"),
        ({"url": "ftp://127.0.0.1/h", "events": ["run.failed"]}, "#/url"),
        ({"url": "/relative", "events": ["run.failed"]}, "#/url"),
        ({"url": url, "events": ["run.failed"], "colour": 1}, "#/colour"),
    ]
    for body, pointer in cases:
        r = await client.post(base, json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["errors"][0]["pointer"] == pointer, r.text
    r = await client.get(f"{base}/{uuid.uuid4()}")
    assert r.status_code == 404
    r = await client.post(
        base, json={"url": "https://unresolvable.invalid/h", "events": ["run.failed"]}
    )
    assert r.status_code == 201, r.text  # sending checks the address on every attempt
