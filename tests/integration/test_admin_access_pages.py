"""An admin, without a terminal, restricts a user to one workflow and sees it take effect:
grants from the access page, groups and projects from the admin pages; every change is on
the audit log."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select

from backend.db.models import AuditLog
from backend.runtime import Runtime
from backend.settings import Settings
from tests.integration.rbac import client_as, make_user

pytestmark = pytest.mark.integration


async def _workflow(admin: httpx.AsyncClient, name: str) -> str:
    return str((await admin.post("/api/workflows", json={"name": name})).json()["id"])


async def test_admin_restricts_an_editor_to_one_workflow_in_the_ui(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    one = await _workflow(client, "Only this one")
    other = await _workflow(client, "Another")
    editor_id = await make_user(runtime, "ed@example.com", "editor")
    page = await client.get(f"/workflows/{one}/access")
    assert page.status_code == 200 and f"user:{editor_id}" in page.text
    r = await client.post(
        f"/workflows/{one}/access", data={"subject": f"user:{editor_id}", "level": "edit"}
    )
    assert r.status_code in (302, 303), r.text
    page = await client.get(f"/workflows/{one}/access")
    assert "ed@example.com" in page.text and ">edit<" in page.text

    async with client_as(settings, runtime, "ed@example.com") as editor:
        listing = (await editor.get("/workflows")).text
        assert "Only this one" in listing and "Another" not in listing
        assert [w["name"] for w in (await editor.get("/api/workflows")).json()] == ["Only this one"]
        designer = await editor.get(f"/workflows/{one}/designer")
        assert 'id="publish-btn"' in designer.text and 'id="run-btn"' in designer.text
        assert 'id="access-link"' not in designer.text  # edit, not manage
        refused = await editor.get(f"/workflows/{other}/designer")  # a page: says why
        assert refused.status_code == 403 and "no access to this workflow" in refused.text
        assert (await editor.get(f"/api/v1/workflows/{other}")).status_code == 404
        assert (await editor.get(f"/workflows/{one}/access")).status_code == 403
        assert "/admin/groups" not in listing

        # A group reads a project holding the other workflow: it appears, read only.
        r = await client.post("/admin/groups", data={"name": "Ops"})
        assert r.status_code in (302, 303), r.text
        groups = (await client.get("/api/admin/groups")).json()
        group_id = groups[0]["id"]
        r = await client.post(f"/admin/groups/{group_id}/members", data={"user_id": str(editor_id)})
        assert r.status_code in (302, 303), r.text
        r = await client.post("/admin/projects", data={"name": "Finance"})
        project_id = (await client.get("/api/admin/projects")).json()[0]["id"]
        r = await client.post(
            "/admin/projects/move", data={"object": f"workflow:{other}", "project_id": project_id}
        )
        assert r.status_code in (302, 303), r.text
        r = await client.post(
            f"/admin/projects/{project_id}/grants",
            data={"subject": f"group:{group_id}", "level": "read"},
        )
        assert r.status_code in (302, 303), r.text
        projects_page = (await client.get("/admin/projects")).text
        assert "Finance" in projects_page and "group Ops" in projects_page
        designer = await editor.get(f"/workflows/{other}/designer")
        assert designer.status_code == 200
        assert 'id="read-only-badge"' in designer.text and 'id="publish-btn"' not in designer.text
        r = await editor.put(f"/api/workflows/{other}/draft", json={"diagram": {"nodes": []}})
        assert r.status_code == 403

        # Revoking the workflow grant takes effect on the next request.
        grant_id = (await client.get(f"/api/workflows/{one}/grants")).json()[0]["id"]
        r = await client.post(f"/workflows/{one}/access/{grant_id}/delete")
        assert r.status_code in (302, 303)
        assert "Only this one" not in (await editor.get("/workflows")).text
        assert (await editor.get(f"/api/workflows/{one}")).status_code == 404

    bad = await client.post(f"/workflows/{one}/access", data={"subject": "user:nope", "level": "x"})
    assert bad.status_code == 400 and 'id="access-error"' in bad.text
    async with runtime.sessionmaker() as session:
        rows = (await session.execute(select(AuditLog.action, AuditLog.actor_label))).all()
    actions = {a for a, _ in rows}
    assert {
        "grant.create",
        "grant.delete",
        "group.create",
        "group.member_add",
        "project.create",
        "project.move",
    } <= actions
    assert {label for a, label in rows if a.startswith(("grant.", "group.", "project."))} == {
        "admin@example.com"
    }


async def test_admin_pages_are_for_admins_and_tokens_page_revokes(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    token = (await client.post("/api/tokens", json={"name": "script"})).json()
    page = await client.get("/admin/tokens")
    assert page.status_code == 200 and "script" in page.text
    assert 'href="/admin/groups"' in page.text  # the Admin nav group
    r = await client.post(f"/admin/tokens/{token['id']}/revoke")
    assert r.status_code in (302, 303)
    assert (await client.get("/api/admin/tokens")).json() == []
    r = await client.post("/admin/service-accounts", data={"name": "Nightly", "role": "viewer"})
    assert r.status_code in (302, 303), r.text
    account = (await client.get("/api/admin/service-accounts")).json()[0]
    r = await client.post(
        f"/admin/service-accounts/{account['id']}/tokens",
        data={"name": "n", "scopes": "read", "expires_in_days": "7"},
    )
    assert r.status_code == 201 and 'id="new-token"' in r.text
    r = await client.post(
        f"/admin/service-accounts/{account['id']}/tokens",
        data={"name": "n", "scopes": "admin", "expires_in_days": "7"},
    )
    assert r.status_code == 400 and "at most" in r.text
    async with client_as(settings, runtime, "v@example.com", "viewer") as viewer:
        for path in ("/admin/tokens", "/admin/groups", "/admin/projects"):
            assert (await viewer.get(path)).status_code == 403
        home = (await viewer.get("/workflows")).text
        assert "/admin/" not in home and 'id="new-workflow-form"' not in home
