"""The audit page and API (filters, keyset pages, JSON-lines export) and the settings
overview: admins only, secrets masked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import text

from backend.app import create_app
from backend.runtime import Runtime
from backend.services.identity import accounts
from backend.settings import Settings
from tests.integration.conftest import ADMIN_EMAIL, TEST_ENCRYPTION_KEY, login

pytestmark = pytest.mark.integration

VIEWER_EMAIL = "viewer@example.com"
VIEWER_PASSWORD = "quiet harbour lanterns 7"


async def seed(runtime: Runtime, count: int, **columns: str) -> None:
    """``count`` rows, the newest first in id order reversed (row n is n minutes old)."""
    values = {
        "action": "'workflow.create'",
        "object_type": "'workflow'",
        "object_id": "'w-' || n",
        "actor_label": "'Ada@Example.com'",
        "at": "timestamptz '2026-06-01 12:00+00' - make_interval(mins => n)",
        **columns,
    }
    names = ", ".join(values)
    exprs = ", ".join(values.values())
    async with runtime.engine.begin() as conn:
        await conn.execute(
            text(
                f"insert into audit_log ({names}, details)"
                f" select {exprs}, '{{}}' from generate_series({count}, 1, -1) n"
            )
        )


@pytest_asyncio.fixture
async def viewer(settings: Settings, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    async with runtime.sessionmaker() as session, session.begin():
        await accounts.create_user(session, VIEWER_EMAIL, VIEWER_PASSWORD, role="viewer")
    transport = httpx.ASGITransport(app=create_app(settings, runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
        await login(c, VIEWER_EMAIL, VIEWER_PASSWORD)
        yield c


async def test_filters_and_keyset_pages(client: httpx.AsyncClient, runtime: Runtime) -> None:
    await seed(runtime, 5)
    await seed(runtime, 2, action="'run.cancel'", object_type="'run'", actor_label="NULL")
    everything = (await client.get("/api/admin/audit", params={"limit": 500})).json()
    ids = [e["id"] for e in everything["entries"]]
    assert ids == sorted(ids, reverse=True) and everything["next_before_id"] is None

    # pages of two, following next_before_id, give the same rows once each
    seen: list[int] = []
    params: dict[str, object] = {"limit": 2}
    while True:
        page = (await client.get("/api/admin/audit", params=params)).json()
        seen += [e["id"] for e in page["entries"]]
        if page["next_before_id"] is None:
            break
        params["before_id"] = page["next_before_id"]
    assert seen == ids

    async def matching(**params: str) -> list[str]:
        r = await client.get("/api/admin/audit", params={**params, "limit": "500"})
        assert r.status_code == 200, r.text
        return [e["object_id"] for e in r.json()["entries"]]

    assert len(await matching(actor="ada@example.COM")) == 5  # case-insensitive
    # the fixture's own admin account was created without an actor too (user.create)
    assert sorted(o for o in await matching(actor="system") if o.startswith("w-")) == ["w-1", "w-2"]
    assert len(await matching(action="run.")) == 2
    assert len(await matching(action="workflow.create")) == 5
    assert await matching(action="workflow.create_") == []  # a prefix, "_" is literal
    assert await matching(object_type="workflow", object_id="w-3") == ["w-3"]
    # since <= at < until; a time without offset is UTC
    assert await matching(
        action="workflow.", since="2026-06-01T11:56", until="2026-06-01T11:58:00+00:00"
    ) == ["w-3", "w-4"]
    r = await client.get("/api/admin/audit", params={"since": "yesterday"})
    assert r.status_code == 400 and r.json()["field"] == "since"


async def test_export_streams_every_matching_entry_as_json_lines(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    await seed(runtime, 1203)
    await seed(runtime, 3, action="'run.start'")
    for path in ("/api/admin/audit/export.jsonl", "/admin/audit/export.jsonl"):
        r = await client.get(path, params={"action": "workflow."})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/x-ndjson")
        assert "attachment" in r.headers["content-disposition"]
        lines = [json.loads(line) for line in r.text.splitlines()]
        assert len(lines) == 1203
        assert {e["action"] for e in lines} == {"workflow.create"}
        assert len({e["id"] for e in lines}) == 1203
        assert set(lines[0]) >= {"at", "actor_label", "address", "request_id", "before", "after"}


async def test_audit_page_shows_rows_with_diff_and_pages(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    r = await client.post("/api/workflows", json={"name": "First name"})
    wid = r.json()["id"]
    await client.patch(f"/api/workflows/{wid}", json={"name": "Second name"})
    page = await client.get("/admin/audit", params={"object_id": wid})
    assert page.status_code == 200
    html = page.text
    assert 'data-action="workflow.update"' in html and 'data-action="workflow.create"' in html
    assert ADMIN_EMAIL in html and "127.0.0.1" in html
    # the diffs: the rename, and the created workflow's fields
    assert '<del class="diff-before">"First name"</del>' in html
    assert '<ins class="diff-after">"Second name"</ins>' in html
    assert '<span class="diff-path mono">description</span>' in html
    assert 'id="audit-older"' not in html

    await seed(runtime, 60)
    html = (await client.get("/admin/audit", params={"action": "workflow.create"})).text
    assert html.count('class="audit-row"') == 50
    assert 'id="audit-older"' in html and "before_id=" in html
    bad = await client.get("/admin/audit", params={"until": "noon"})
    assert bad.status_code == 400 and "until must be an ISO 8601" in bad.text


async def test_settings_overview_masks_secrets(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    r = await client.get("/api/admin/settings")
    assert r.status_code == 200
    shown = {s["name"]: s for s in r.json()}
    assert shown["encryption_key"]["value"] == "set (hidden)" and shown["encryption_key"]["secret"]
    assert shown["secret_key"]["value"] == "set (hidden)"
    assert shown["audit_retention_days"] == {
        "name": "audit_retention_days",
        "variable": "RAILYARD_AUDIT_RETENTION_DAYS",
        "value": "365",
        "secret": False,
        "default": True,
    }
    page = (await client.get("/admin/settings")).text
    for body in (r.text, page):
        assert TEST_ENCRYPTION_KEY not in body and settings.secret_key not in body
    assert "RAILYARD_REDACT_HEADERS" in page


async def test_only_admins_read_the_audit_log_and_settings(
    client: httpx.AsyncClient, viewer: httpx.AsyncClient
) -> None:
    for path in (
        "/api/admin/audit",
        "/api/admin/audit/export.jsonl",
        "/api/admin/settings",
        "/admin/audit",
        "/admin/audit/export.jsonl",
        "/admin/settings",
    ):
        assert (await viewer.get(path)).status_code == 403, path
        assert (await client.get(path)).status_code == 200, path
    assert 'href="/admin/audit"' in (await client.get("/workflows")).text
    assert 'href="/admin/audit"' not in (await viewer.get("/workflows")).text
