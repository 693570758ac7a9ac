"""Search never shows a hit its user could not open: per role, per grant (on the workflow,
on its project, through a group), per API token scope, and for the audit log."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from backend.app import create_app
from backend.runtime import Runtime
from backend.services.identity import api_tokens, groups
from backend.services.workflows import projects
from backend.settings import Settings
from tests.integration.rbac import client_as, grant, make_user
from tests.integration.search.data import make_run, make_workflow

pytestmark = pytest.mark.integration


async def hits(c: httpx.AsyncClient, q: str = "", **params: Any) -> set[str]:
    r = await c.get("/api/search", params={"q": q, **params})
    assert r.status_code == 200, r.text
    return {h["id"] for h in r.json()["hits"]}


@pytest.fixture
async def world(client: httpx.AsyncClient, runtime: Runtime) -> dict[str, Any]:
    """Three workflows with one failed run each: Alice's own, a granted one, a project's."""
    alice = await make_user(runtime, "alice@example.com", "editor")
    own = await make_workflow(runtime, "Alice own", owner=alice)
    granted = await make_workflow(runtime, "Granted flow")
    in_project = await make_workflow(runtime, "Project flow")
    hidden = await make_workflow(runtime, "Hidden flow")
    async with runtime.sessionmaker() as s, s.begin():
        project = await projects.create_project(s, "Billing", actor_id=None)
        await projects.move(s, "workflow", in_project, project.id)
    runs = {}
    for name, wf in (("own", own), ("granted", granted), ("project", in_project)):
        runs[name] = str(await make_run(runtime, wf, status="failed", input={"k": "needle"}))
    runs["hidden"] = str(await make_run(runtime, hidden, status="failed", input={"k": "needle"}))
    return {
        "alice": alice,
        "project": str(project.id),
        "wf": {"own": own, "granted": granted, "project": in_project, "hidden": hidden},
        "runs": runs,
    }


@pytest.mark.parametrize("role", ["editor", "operator", "viewer"])
async def test_search_shows_each_role_only_granted_runs(
    settings: Settings, runtime: Runtime, world: dict[str, Any], role: str
) -> None:
    runs, wf = world["runs"], world["wf"]
    async with client_as(settings, runtime, f"{role}@example.com", role) as c:
        assert await hits(c, "needle") == set()
        assert await hits(c, "in:workflows") == set()
        user = (await c.get("/api/auth/me")).json()["id"]
        await grant(runtime, "workflow", str(wf["granted"]), f"user:{user}", "read")
        assert await hits(c, "needle") == {runs["granted"]}
        await grant(runtime, "project", world["project"], f"user:{user}", "read")
        assert await hits(c, "needle status:failed") == {runs["granted"], runs["project"]}
        assert await hits(c, "in:workflows") == {str(wf["granted"]), str(wf["project"])}
        # facets count only what the user sees
        r = (await c.get("/api/search", params={"q": ""})).json()
        status = next(f for f in r["facets"] if f["field"] == "status")
        assert status["values"] == [{"value": "failed", "count": 2, "label": ""}]
        assert r["total"] == 2
        # the audit log is an admin's
        assert await hits(c, "in:audit") == set()


async def test_search_owner_group_grant_and_admin(
    settings: Settings, client: httpx.AsyncClient, runtime: Runtime, world: dict[str, Any]
) -> None:
    runs, wf = world["runs"], world["wf"]
    async with client_as(settings, runtime, "alice@example.com") as alice:
        assert await hits(alice, "needle") == {runs["own"]}
        async with runtime.sessionmaker() as s, s.begin():
            group = await groups.create_group(s, "ops")
            await groups.add_member(s, group.id, world["alice"])
        await grant(runtime, "workflow", str(wf["hidden"]), f"group:{group.id}", "run")
        assert await hits(alice, "needle") == {runs["own"], runs["hidden"]}
    assert await hits(client, "needle") == set(runs.values())
    assert len(await hits(client, "in:audit")) > 0


async def test_search_by_api_token_follows_its_owner(
    settings: Settings, runtime: Runtime, world: dict[str, Any]
) -> None:
    async with runtime.sessionmaker() as s, s.begin():
        _, token = await api_tokens.create_token(s, world["alice"], "search", scopes=["read"])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(settings, runtime)),
        base_url="http://testserver.local",
        headers={"authorization": f"Bearer {token}"},
    ) as c:
        assert await hits(c, "needle") == {world["runs"]["own"]}
        assert await hits(c, "in:audit") == set()
