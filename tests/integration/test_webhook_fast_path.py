"""The webhook's per-request shortcuts keep their meaning: the endpoint cache (one load
for concurrent requests, reloaded ahead of expiry, forgotten on publish even mid-load) and
the shared run-notice subscription of waiting webhooks (one connection for all waits, and
answers still arrive after that connection is killed). Real PostgreSQL, Redis and worker."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from backend.runtime import Runtime
from backend.services.triggers import webhooks as hooks
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


class CountingSessions:
    """The runtime's sessionmaker, counting the sessions opened; while ``gate`` is
    set to an unset event, each session waits for it before it is handed out."""

    def __init__(self, runtime: Runtime) -> None:
        self.inner = runtime.sessionmaker
        self.opened = 0
        self.gate: asyncio.Event | None = None

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[AsyncSession]:
        self.opened += 1
        if self.gate is not None:
            await self.gate.wait()
        async with self.inner() as session:
            yield session


async def test_endpoint_cache_loads_once_for_concurrent_requests(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    token = wf["webhook_path"].rsplit("/", 1)[-1]
    hooks.clear_endpoint_cache()
    sessions = CountingSessions(runtime)
    found = await asyncio.gather(
        *(hooks.cached_endpoint(sessions, token, 60) for _ in range(20))  # type: ignore[arg-type]
    )
    assert sessions.opened == 1
    assert {e.workflow_id for e in found if e is not None} == {found[0].workflow_id}  # type: ignore[union-attr]
    assert str(found[0].workflow_id) == wf["id"]  # type: ignore[union-attr]
    await hooks.cached_endpoint(sessions, token, 60)  # type: ignore[arg-type]
    assert sessions.opened == 1  # a hit


async def test_endpoint_cache_reloads_ahead_of_expiry(
    client: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    token = wf["webhook_path"].rsplit("/", 1)[-1]
    now = [1000.0]
    monkeypatch.setattr(hooks, "clock", lambda: now[0])
    hooks.clear_endpoint_cache()
    sessions = CountingSessions(runtime)
    await hooks.cached_endpoint(sessions, token, 10)  # type: ignore[arg-type]
    now[0] += 4  # younger than half the cache time: a plain hit
    await hooks.cached_endpoint(sessions, token, 10)  # type: ignore[arg-type]
    assert sessions.opened == 1
    now[0] += 2  # older than half: answered from the cache, one reload in the background
    sessions.gate = asyncio.Event()
    for _ in range(5):
        assert await hooks.cached_endpoint(sessions, token, 10) is not None  # type: ignore[arg-type]
    for _ in range(5):  # let the reload task start (it waits at the gate)
        await asyncio.sleep(0)
    assert sessions.opened == 2
    sessions.gate.set()
    for _ in range(100):  # the reload stores a fresh entry
        await asyncio.sleep(0.01)
        if hooks.clock() - hooks._CACHE[token][0] < 1:
            break
    now[0] += 9  # past the first entry's expiry, within the reloaded one's
    await hooks.cached_endpoint(sessions, token, 10)  # type: ignore[arg-type]
    assert sessions.opened == 2


async def test_endpoint_cache_forgets_a_load_begun_before_publish(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """A load begun before the workflow is published answers its own waiters but is not
    cached (it may have read the old version): the next request loads again."""
    first = diagram([node("hook", "trigger.webhook", path_suffix="old")], [])
    wf = await publish(client, first)
    token = wf["webhook_path"].rsplit("/", 1)[-1]
    hooks.clear_endpoint_cache()
    sessions = CountingSessions(runtime)
    sessions.gate = asyncio.Event()
    early = asyncio.create_task(hooks.cached_endpoint(sessions, token, 60))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    r = await client.put(
        f"/api/workflows/{wf['id']}/draft",
        json={"diagram": diagram([node("hook", "trigger.webhook", path_suffix="new")], [])},
    )
    assert r.json()["ok"], r.json()
    r = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert r.status_code == 201, r.text
    sessions.gate.set()
    assert await early is not None  # its waiters are answered (whatever it read)
    sessions.gate = None
    new = await hooks.cached_endpoint(sessions, token, 60)  # type: ignore[arg-type]
    assert new is not None and new.config.path_suffix == "new"
    assert sessions.opened == 2
    r = await client.post(f"/hooks/{token}/new", json={})
    assert r.status_code == 202, r.text


def _templates(delay: float = 0) -> dict[str, Any]:
    """Webhook answering with its last step <- three Text template steps (after a durable
    delay of ``delay`` seconds when given); the answer to body ``{"n": 7}`` is
    ``{"text": "n7-2-3"}``."""
    nodes = [node("hook", "trigger.webhook", respond="last_step", wait_timeout=20)]
    ids = ["hook"]
    if delay:
        nodes.append(node("pause", "control.delay", seconds=delay))
        ids.append("pause")
    nodes += [
        node("t1", "data.template", template="n{{ input.body.n }}"),
        node("t2", "data.template", template="{{ input.text }}-2"),
        node("t3", "data.template", template="{{ input.text }}-3"),
    ]
    ids += ["t1", "t2", "t3"]
    return diagram(nodes, [edge(a, b) for a, b in itertools.pairwise(ids)])


async def _pubsub_subscriptions(runtime: Runtime) -> list[int]:
    """The channel subscriptions (``sub``) of each Redis connection in pub/sub mode."""
    return [int(c["sub"]) for c in await runtime.redis.client_list(_type="pubsub")]


async def test_waiting_webhooks_share_one_subscription(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """Five webhooks waiting at once for their runs' last step: every run channel is
    subscribed on one connection of this process, and each request gets its own run's
    output."""
    wf = await publish(client, _templates(delay=2))
    requests = [
        asyncio.create_task(client.post(wf["webhook_path"], json={"n": i})) for i in range(5)
    ]
    channels: list[Any] = []
    for _ in range(400):
        channels = await runtime.redis.pubsub_channels("railyard:run:*")
        if len(channels) == 5:
            break
        await asyncio.sleep(0.005)
    assert len(channels) == 5
    # one connection holds all five (the worker's own connections, which may still be
    # subscribing as the test starts, hold one or two channels each)
    assert len([n for n in await _pubsub_subscriptions(runtime) if n >= 5]) == 1
    answers = await asyncio.gather(*requests)
    for i, r in enumerate(answers):
        assert r.status_code == 200, r.text
        assert r.json() == {"text": f"n{i}-2-3"}
    # each channel is left in the background once its answer is made (run_watch.py):
    # soon after the answers, not necessarily before them
    for _ in range(400):
        channels = await runtime.redis.pubsub_channels("railyard:run:*")
        if not channels:
            break
        await asyncio.sleep(0.005)
    assert channels == []


async def test_waiting_webhook_answers_after_the_notice_connection_dies(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """Killing the shared subscription's connection loses no answer: the waits poll, and
    the next waits subscribe on a new connection."""
    wf = await publish(client, _templates())
    r = await client.post(wf["webhook_path"], json={"n": 1})
    assert r.status_code == 200 and r.json() == {"text": "n1-2-3"}
    await runtime.redis.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
    for n in (2, 3):
        r = await client.post(wf["webhook_path"], json={"n": n})
        assert r.status_code == 200 and r.json() == {"text": f"n{n}-2-3"}, r.text
