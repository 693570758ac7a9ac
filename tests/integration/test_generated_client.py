"""The /api/v1 document generates a Python client: openapi-python-client builds one with
zero warnings, and that client, authenticated with an API token, drives a workflow's whole
lifecycle against the app: create, save draft, publish, start runs with an idempotency key,
watch a run to its end through the run event stream (Server-Sent Events, read with
httpx-sse on the generated client's own HTTP client, each event decoded with the generated
model of its type), page through runs with the list envelope's cursor, search, export and
import."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from backend.app import create_app
from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node

pytestmark = pytest.mark.integration

PACKAGE = "railyard_v1_client"
# The audit export is JSON Lines (application/x-ndjson), a type the generator has no reader
# for; its documented content_type_overrides setting reads such answers as bytes.
CONFIG = """content_type_overrides:
  application/x-ndjson: application/octet-stream
post_hooks: []
"""
TERMINAL = {"succeeded", "failed", "cancelled", "timed_out"}


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Path]:
    """A tmp dir from which a package generated into it imports while the test runs."""
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def generate(tmp_path: Path, document: str) -> str:
    """Run openapi-python-client on ``document`` into ``tmp_path/PACKAGE``; its output
    (stdout and stderr), after asserting exit status 0."""
    (tmp_path / "openapi.json").write_text(document)
    (tmp_path / "config.yaml").write_text(CONFIG)
    command = [sys.executable, "-m", "openapi_python_client", "generate", "--meta", "none"]
    files = ["--path", "openapi.json", "--config", "config.yaml", "--output-path", PACKAGE]
    done = subprocess.run(
        [*command, *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def module(name: str) -> ModuleType:
    """A module of the generated package, e.g. ``api.runs.get_run``."""
    return importlib.import_module(f"{PACKAGE}.{name}")


async def test_the_document_generates_a_client_that_drives_a_lifecycle(
    client: httpx.AsyncClient,
    settings: Settings,
    runtime: Runtime,
    generated: Path,
) -> None:
    tmp_path = generated
    document = await client.get("/schema/openapi.json")
    assert document.status_code == 200, document.text
    output = await asyncio.to_thread(generate, tmp_path, document.text)
    assert "WARNING" not in output and "Unable to" not in output, output
    assert "Warning(s) encountered" not in output, output

    token = await client.post("/api/v1/tokens", json={"name": "generated client"})
    assert token.status_code == 201, token.text
    api = module("client").AuthenticatedClient(
        base_url=str(client.base_url),
        token=token.json()["token"],
        httpx_args={"transport": httpx.ASGITransport(app=create_app(settings, runtime))},
    )
    models = module("models")
    workflows = "api.workflows."
    created = await module(workflows + "create_workflow").asyncio(
        client=api, body=models.WorkflowCreate(name="Generated client")
    )
    assert isinstance(created, models.WorkflowOut), created
    wf = uuid.UUID(created.id)
    d = diagram(
        [node("start", "trigger.manual"), node("s", "control.set", mapping={"n": "=1"})],
        [edge("start", "s")],
    )
    saved = await module(workflows + "save_draft").asyncio(
        wf, client=api, body=models.DraftIn(diagram=models.Diagram.from_dict(d))
    )
    assert isinstance(saved, models.DraftSavedOut) and saved.ok, saved
    published = await module(workflows + "publish_workflow").asyncio_detailed(
        wf, client=api, body=models.PublishIn(note="first")
    )
    assert published.status_code == 201, published.content

    start = module(workflows + "start_run")
    first = await start.asyncio(
        wf, client=api, body=models.RunCreate(input_={"n": 1}), idempotency_key="order-1"
    )
    again = await start.asyncio(
        wf, client=api, body=models.RunCreate(input_={"n": 1}), idempotency_key="order-1"
    )
    assert isinstance(first, models.RunStarted) and isinstance(again, models.RunStarted)
    assert again.id == first.id
    too_long = await start.asyncio_detailed(
        wf, client=api, body=models.RunCreate(), idempotency_key="k" * 201
    )
    assert too_long.status_code == 400 and isinstance(too_long.parsed, models.Problem)
    others = [await start.asyncio(wf, client=api, body=models.RunCreate()) for _ in range(2)]
    started = {first.id} | {r.id for r in others if isinstance(r, models.RunStarted)}
    assert len(started) == 3

    assert await watch(api, first.id) == "succeeded"
    # the generated function reads a stream whole (its body untyped): an ended run's is one
    # update
    stream = module("api.runs.stream_run_events")
    whole = await stream.asyncio_detailed(uuid.UUID(first.id), client=api)
    assert whole.status_code == 200 and whole.content.startswith(b"event: update"), whole

    list_runs = module("api.runs.list_runs")
    seen: list[str] = []
    cursor: Any = module("types").UNSET
    for _ in range(4):
        page = await list_runs.asyncio(client=api, workflow_id=wf, limit=2, cursor=cursor)
        assert isinstance(page, models.RunList), page
        seen += [r.id for r in page.data]
        if not page.has_more:
            break
        assert page.next_cursor
        cursor = page.next_cursor
    assert len(seen) == 3 and set(seen) == started

    found = await module("api.search.search").asyncio(
        client=api, q="Generated client", in_="workflows"
    )
    assert isinstance(found, models.SearchList), found
    assert [(h.kind, h.id) for h in found.data] == [("workflow", created.id)], found

    exported = await module("api.versions.export_workflow").asyncio(wf, client=api)
    assert isinstance(exported, models.WorkflowExport), exported
    imported = await module("api.versions.import_workflow").asyncio_detailed(
        client=api, body=exported, name="Generated client (imported)"
    )
    assert imported.status_code == 201, imported.content
    copy = imported.parsed
    assert isinstance(copy, models.ImportedOut) and copy.id != created.id, copy
    assert copy.name == "Generated client (imported)"
    again_exported = await module("api.versions.export_workflow").asyncio(
        uuid.UUID(copy.id), client=api
    )
    assert isinstance(again_exported, models.WorkflowExport)
    assert again_exported.diagram.to_dict() == exported.diagram.to_dict()


async def watch(api: Any, run_id: str, timeout: float = 30.0) -> str:
    """Follow the run's event stream (``GET /api/v1/runs/{id}/events``, its method and
    path from the generated module) on the generated client's HTTP client until the run
    ends; its last status. Every event must decode as the generated ``RunUpdateEvent``.
    Fails after ``timeout`` seconds."""
    request = module("api.runs.stream_run_events")._get_kwargs(uuid.UUID(run_id))
    update = module("models").RunUpdateEvent
    http = api.get_async_httpx_client()
    status = ""
    async with asyncio.timeout(timeout):
        async with aconnect_sse(http, request["method"].upper(), request["url"]) as source:
            assert source.response.status_code == 200, await source.response.aread()
            async for sse in source.aiter_sse():
                event = update.from_dict({"event": sse.event, "data": sse.json()})
                assert event.data.id == run_id
                status = event.data.status
    assert status in TERMINAL, f"the stream of run {run_id} closed at status {status!r}"
    return status
