"""The Elasticsearch indexer through the transactional outbox, against a local server
emulating Elasticsearch's documented ``_bulk`` API: real runs (webhook, engine, events)
reach the index; with the search backend stopped nothing moves and nothing is lost, and
after its restart everything catches up; gaps of uncommitted transactions are waited for;
workflow changes and deletions follow; a re-index rebuilds everything."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.search.elastic import ElasticSearch, make_client
from backend.search.es_indexer import OutboxIndexer, SinkUnavailable
from tests.diagrams import diagram, edge, node
from tests.fakes.elasticsearch import ElasticsearchLike
from tests.integration.conftest import wait_for_run

pytestmark = pytest.mark.integration

PREFIX = "ry-test"
RUNS, AUDIT, WORKFLOWS = f"{PREFIX}-runs", f"{PREFIX}-audit", f"{PREFIX}-workflows"


@pytest.fixture
async def es(runtime: Runtime) -> AsyncIterator[tuple[ElasticsearchLike, ElasticSearch]]:
    server = ElasticsearchLike().start()
    backend = ElasticSearch(
        make_client(server.url, retry_on_timeout=False, max_retries=0), runtime.sessionmaker, PREFIX
    )
    await backend.ensure_indexes()
    try:
        yield server, backend
    finally:
        await backend.close()
        server.stop()


async def publish_greeter(client: httpx.AsyncClient) -> dict[str, Any]:
    """Webhook -> Set (greeting from the body): ends inline, one run per call."""
    wf = (await client.post("/api/workflows", json={"name": "Greeter", "tags": ["demo"]})).json()
    d = diagram(
        [
            node("webhook", "trigger.webhook"),
            node("set_1", "control.set", 200, 0, mapping={"greeting": "='hello ' & body.name"}),
        ],
        [edge("webhook", "set_1")],
    )
    await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    r = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert r.status_code == 201, r.text
    return {**wf, "hook": "/hooks/" + r.json()["webhook_url"].rsplit("/hooks/", 1)[1]}


async def start_runs(
    client: httpx.AsyncClient, runtime: Runtime, hook: str, names: list[str]
) -> list[str]:
    ids = []
    for name in names:
        r = await client.post(hook, json={"name": name})
        assert r.status_code in (200, 202), r.text
        run_id = r.json().get("run_id") or r.headers["x-railyard-run-id"]
        assert await wait_for_run(runtime, run_id) == "succeeded"
        ids.append(run_id)
    return ids


@dataclass
class Greeter:
    """A published Greeter workflow, the emulated Elasticsearch (``server``) and the search
    backend writing to it."""

    client: httpx.AsyncClient
    runtime: Runtime
    server: ElasticsearchLike
    backend: ElasticSearch
    wf: dict[str, Any]

    async def runs(self, names: list[str]) -> list[str]:
        """One webhook run per name, each waited for (succeeded); their ids."""
        return await start_runs(self.client, self.runtime, self.wf["hook"], names)

    def indexer(self, **options: Any) -> OutboxIndexer:
        """An outbox indexer into the backend (``options``: batch, gap_grace, ...)."""
        return OutboxIndexer(self.runtime.sessionmaker, self.backend, prefix=PREFIX, **options)


@pytest.fixture
async def greeter(
    client: httpx.AsyncClient,
    runtime: Runtime,
    worker: Any,
    es: tuple[ElasticsearchLike, ElasticSearch],
) -> Greeter:
    server, backend = es
    return Greeter(client, runtime, server, backend, await publish_greeter(client))


async def catch_up(indexer: OutboxIndexer) -> None:
    for _ in range(100):
        if await indexer.index_once() == 0:
            return
    raise AssertionError("the indexer did not catch up")


async def cursors(runtime: Runtime) -> dict[str, int]:
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(text("select name, position from search_cursors"))
        return {n: int(p) for n, p in rows}


async def test_es_indexer_follows_the_outbox_and_loses_nothing_while_es_is_down(
    greeter: Greeter, runtime: Runtime
) -> None:
    server, wf = greeter.server, greeter.wf
    first = await greeter.runs(["ada", "grace"])
    indexer = greeter.indexer(batch=7)
    await catch_up(indexer)
    runs = server.docs(RUNS)
    assert set(runs) == set(first)
    doc = runs[first[0]]
    assert doc["status"] == "succeeded" and doc["workflow_id"] == wf["id"]
    assert "ada" in doc["text"] and "hello ada" in doc["text"]
    assert set(doc["steps"]) == {"webhook", "set_1"}
    assert server.docs(WORKFLOWS)[wf["id"]]["tags"] == ["demo"]
    assert {d["action"] for d in server.docs(AUDIT).values()} >= {
        "workflow.create",
        "workflow.publish",
    }
    before = await cursors(runtime)

    # Elasticsearch goes away: runs go on, the indexer refuses to move
    server.stop()
    later = await greeter.runs(["linus", "barbara", "edsger"])
    with pytest.raises(SinkUnavailable):
        await indexer.index_once()
    assert await cursors(runtime) == before
    # ... and overloaded (429) is the same
    server.start()
    server.overloaded = True
    with pytest.raises(SinkUnavailable):
        await indexer.index_once()
    assert await cursors(runtime) == before
    server.overloaded = False
    # a new indexer process (a restart) picks up from the stored position
    restarted = greeter.indexer(batch=7)
    await catch_up(restarted)
    assert set(server.docs(RUNS)) == set(first + later)
    assert all(d["status"] == "succeeded" for d in server.docs(RUNS).values())
    after = await cursors(runtime)
    assert after[f"{PREFIX}:events"] > before[f"{PREFIX}:events"]


async def test_es_indexer_waits_for_uncommitted_outbox_rows(
    greeter: Greeter, runtime: Runtime
) -> None:
    server = greeter.server
    run_a, run_b = await greeter.runs(["ada", "bob"])
    indexer = greeter.indexer(gap_grace=0.0)
    await catch_up(indexer)
    # a slow transaction takes an event id and changes run A, but has not committed ...
    async with runtime.engine.connect() as slow:
        tx = await slow.begin()
        await slow.execute(
            text('update runs set output = \'{"late": "slowpoke"}\' where id = :id'), {"id": run_a}
        )
        await slow.execute(
            text("insert into events (run_id, kind, data) values (:id, 'test.late', '{}')"),
            {"id": run_a},
        )
        # ... while a later event of run B commits
        async with runtime.engine.begin() as fast:
            await fast.execute(
                text('update runs set output = \'{"quick": "speedy"}\' where id = :id'),
                {"id": run_b},
            )
            await fast.execute(
                text("insert into events (run_id, kind, data) values (:id, 'test.quick', '{}')"),
                {"id": run_b},
            )
        await catch_up(indexer)
        assert "speedy" in server.docs(RUNS)[run_b]["text"]  # indexed at once
        held = (await cursors(runtime))[f"{PREFIX}:events"]
        await catch_up(indexer)
        assert (await cursors(runtime))[f"{PREFIX}:events"] == held  # held back by the gap
        await tx.commit()
    await catch_up(indexer)
    assert "slowpoke" in server.docs(RUNS)[run_a]["text"]
    assert (await cursors(runtime))[f"{PREFIX}:events"] > held


async def test_es_indexer_follows_workflow_changes_and_deletes(
    greeter: Greeter, client: httpx.AsyncClient
) -> None:
    server, wf = greeter.server, greeter.wf
    await greeter.runs(["ada"])
    indexer = greeter.indexer()
    await catch_up(indexer)
    r = await client.patch(f"/api/workflows/{wf['id']}", json={"name": "Greeter 2", "tags": ["x"]})
    assert r.status_code == 200
    await catch_up(indexer)
    assert server.docs(WORKFLOWS)[wf["id"]]["name"] == "Greeter 2"
    runs_before = set(server.docs(RUNS))
    assert runs_before
    # delete = archive: the workflow leaves the index, its runs stay searchable
    assert (await client.delete(f"/api/workflows/{wf['id']}")).status_code in (200, 204)
    await catch_up(indexer)
    assert wf["id"] not in server.docs(WORKFLOWS)
    assert set(server.docs(RUNS)) == runs_before
    assert (await client.post(f"/api/workflows/{wf['id']}/restore")).status_code == 200
    await catch_up(indexer)
    assert server.docs(WORKFLOWS)[wf["id"]]["name"] == "Greeter 2"


async def test_es_reindex_rebuilds_every_document(greeter: Greeter) -> None:
    server, wf = greeter.server, greeter.wf
    run_ids = await greeter.runs(["ada", "grace", "linus"])
    counts = await greeter.backend.reindex(batch=2)
    assert counts["runs"] == 3 and counts["workflows"] == 1 and counts["audit"] >= 2
    assert set(server.docs(RUNS)) == set(run_ids)
    assert set(server.docs(WORKFLOWS)) == {wf["id"]}
    assert len(server.docs(AUDIT)) == counts["audit"]
    assert uuid.UUID(run_ids[0])


def _command_env(runtime: Runtime, server: ElasticsearchLike) -> dict[str, str]:
    url = runtime.settings.database_url
    return {
        **os.environ,
        "DATABASE_URL": url,
        "RAILYARD_SEARCH_BACKEND": "elasticsearch",
        "RAILYARD_ELASTICSEARCH_URL": server.url,
        "RAILYARD_SEARCH_INDEX_PREFIX": PREFIX,
    }


async def test_search_commands_reindex_and_follow_the_outbox(
    greeter: Greeter, runtime: Runtime
) -> None:
    server = greeter.server
    (first,) = await greeter.runs(["ada"])
    railyard = str(Path(sys.executable).with_name("railyard"))
    env = _command_env(runtime, server)
    done = await asyncio.create_subprocess_exec(
        railyard, "search-reindex", env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await done.communicate()
    assert done.returncode == 0 and b"re-indexed 1 runs" in out
    assert set(server.docs(RUNS)) == {first}
    follower = await asyncio.create_subprocess_exec(railyard, "search-indexer", env=env)
    try:
        (second,) = await greeter.runs(["grace"])
        for _ in range(400):  # up to 20 s
            if second in server.docs(RUNS):
                break
            await asyncio.sleep(0.05)
        assert server.docs(RUNS)[second]["status"] == "succeeded"
    finally:
        follower.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(follower.wait(), 20) == 0
