"""An import done through one API process is in the catalog of another API process at
its next request, without a restart: two app instances, each with its own runtime and
catalog, over the same PostgreSQL and Redis; also when Redis lost the counter that
announces imports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.runtime import Runtime, build_runtime
from backend.services.connectors.openapi_catalog import VERSION_KEY
from backend.settings import Settings
from tests.integration.conftest import login

pytestmark = pytest.mark.integration

DOCUMENT = """
openapi: 3.0.3
info: {title: Ledger, version: "VERSION"}
servers: [{url: "https://ledger.example"}]
paths:
  /entries:
    get:
      operationId: listEntries
      summary: List entries
      parameters: [PARAMS]
      responses: {"200": {description: ok}}
"""


def _document(version: int, *params: str) -> str:
    fields = ", ".join(f"{{name: {p}, in: query, schema: {{type: string}}}}" for p in params)
    return DOCUMENT.replace("VERSION", str(version)).replace("PARAMS", fields)


@pytest.fixture
async def other_api(
    settings: Settings, runtime: Runtime, client: httpx.AsyncClient
) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """A second API process: its own runtime (catalog loaded at start), the same servers."""
    rt = await build_runtime(settings, pool_size=2)
    await rt.load_imported_connectors()
    transport = httpx.ASGITransport(app=create_app(settings, rt))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
            await login(c)
            yield rt, c
    finally:
        await rt.close()


async def _ledger(c: httpx.AsyncClient) -> dict[str, Any] | None:
    catalog = (await c.get("/api/catalog")).json()
    return next((n for n in catalog["node_types"] if n["type"] == "ledger.list_entries"), None)


async def test_an_import_in_one_api_process_is_seen_by_another(
    client: httpx.AsyncClient, other_api: tuple[Runtime, httpx.AsyncClient]
) -> None:
    other_rt, other = other_api
    assert await _ledger(other) is None
    r = await client.post(
        "/api/admin/connectors", json={"name": "ledger", "document": _document(1, "since")}
    )
    assert r.status_code == 201, r.text
    spec = await _ledger(other)  # the very next request of the other process
    assert spec is not None and spec["version"] == 1
    assert "since" in spec["config_schema"]["properties"]
    assert other_rt.catalog.connector("ledger") is not None

    r = await client.post(
        "/api/admin/connectors",
        json={"name": "ledger", "document": _document(2, "since", "account")},
    )
    assert r.status_code == 201, r.text
    spec = await _ledger(other)
    assert spec is not None and spec["version"] == 2
    assert "account" in spec["config_schema"]["properties"]
    # a page of the other process too (the palette reads the same catalog)
    page = await other.get("/admin/connectors/ledger")
    assert page.status_code == 200 and 'data-node-type="ledger.list_entries"' in page.text


async def test_a_lost_counter_still_brings_imports_in(
    runtime: Runtime,
    client: httpx.AsyncClient,
    other_api: tuple[Runtime, httpx.AsyncClient],
) -> None:
    other_rt, other = other_api
    assert await _ledger(other) is None  # the other process has seen the counter
    seen = other_rt.catalog_watch.seen
    assert seen is not None
    r = await client.post(
        "/api/admin/connectors", json={"name": "ledger", "document": _document(1, "since")}
    )
    assert r.status_code == 201, r.text
    await runtime.redis.delete(VERSION_KEY)  # Redis flushed after the import was announced
    spec = await _ledger(other)
    assert spec is not None and spec["version"] == 1
    assert other_rt.catalog_watch.seen not in (None, seen)


async def test_requests_without_a_change_read_no_stored_version(
    client: httpx.AsyncClient, other_api: tuple[Runtime, httpx.AsyncClient]
) -> None:
    other_rt, other = other_api
    await _ledger(other)
    refreshes: list[int] = []
    original = other_rt.catalog.refresh

    async def counted() -> None:
        refreshes.append(1)
        await original()

    other_rt.catalog.refresh = counted  # type: ignore[method-assign]
    for _ in range(5):
        await _ledger(other)
    assert refreshes == []  # one Redis GET per request, no database read
    r = await client.post(
        "/api/admin/connectors", json={"name": "ledger", "document": _document(1, "since")}
    )
    assert r.status_code == 201, r.text
    await _ledger(other)
    await _ledger(other)
    assert refreshes == [1]
