"""Concurrent editing of one draft on real PostgreSQL: a save based on an older revision is
refused with 409 naming who saved and when; nothing is overwritten silently."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from backend.app import create_app
from backend.runtime import Runtime
from backend.services.identity import accounts
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import login

pytestmark = pytest.mark.integration

SECOND_EMAIL = "second.editor@example.com"
SECOND_PASSWORD = "copper kettle morning 42"


def drawing(label: str) -> dict:
    return diagram(
        [node("hook", "trigger.webhook"), node("set_1", "control.set", mapping={"a": label})],
        [edge("hook", "set_1")],
    )


async def new_workflow(client: httpx.AsyncClient) -> tuple[str, int]:
    r = await client.post("/api/workflows", json={"name": "Shared draft"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"]), r.json()["draft_revision"]


async def second_client(
    settings: Settings, runtime: Runtime, admin: httpx.AsyncClient, workflow_id: str
) -> httpx.AsyncClient:
    """A second editor, granted edit on the admin's workflow, logged in."""
    async with runtime.sessionmaker() as session, session.begin():
        second = await accounts.create_user(
            session, SECOND_EMAIL, SECOND_PASSWORD, role="editor", name="Second Editor"
        )
    r = await admin.post(
        f"/api/workflows/{workflow_id}/grants",
        json={"subject": f"user:{second.id}", "level": "edit"},
    )
    assert r.status_code in (200, 201), r.text
    transport = httpx.ASGITransport(app=create_app(settings, runtime))
    c = httpx.AsyncClient(transport=transport, base_url="http://testserver.local")
    await login(c, SECOND_EMAIL, SECOND_PASSWORD)
    return c


async def test_draft_save_on_stale_revision_is_refused_with_who_and_when(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    wf, base = await new_workflow(client)
    other = await second_client(settings, runtime, client, wf)
    try:
        first = await other.put(
            f"/api/workflows/{wf}/draft",
            json={"diagram": drawing("theirs"), "base_revision": base},
        )
        assert first.status_code == 200, first.text
        assert first.json()["revision"] == base + 1

        stale = await client.put(
            f"/api/workflows/{wf}/draft", json={"diagram": drawing("mine"), "base_revision": base}
        )
        assert stale.status_code == 409, stale.text
        body = stale.json()
        assert body["revision"] == base + 1
        assert body["saved_by"] == "Second Editor"
        assert body["saved_at"] and "Second Editor" in body["detail"]

        stored = (await client.get(f"/api/workflows/{wf}")).json()
        assert stored["draft"]["nodes"][1]["config"]["mapping"] == {"a": "theirs"}
        assert stored["draft_revision"] == base + 1

        # "Overwrite": the editor saves again on the revision the conflict named.
        forced = await client.put(
            f"/api/workflows/{wf}/draft",
            json={"diagram": drawing("mine"), "base_revision": body["revision"]},
        )
        assert forced.status_code == 200 and forced.json()["revision"] == base + 2
        stored = (await client.get(f"/api/workflows/{wf}")).json()
        assert stored["draft"]["nodes"][1]["config"]["mapping"] == {"a": "mine"}
    finally:
        await other.aclose()


async def test_two_simultaneous_saves_on_one_revision_exactly_one_wins(
    client: httpx.AsyncClient,
) -> None:
    wf, base = await new_workflow(client)
    results = await asyncio.gather(
        *(
            client.put(
                f"/api/workflows/{wf}/draft",
                json={"diagram": drawing(f"edit {i}"), "base_revision": base},
            )
            for i in range(4)
        )
    )
    codes = sorted(r.status_code for r in results)
    assert codes == [200, 409, 409, 409], [r.text for r in results]
    winner = next(r for r in results if r.status_code == 200)
    stored = (await client.get(f"/api/workflows/{wf}")).json()
    assert stored["draft_revision"] == winner.json()["revision"] == base + 1


async def test_save_without_base_revision_overwrites_and_counts(client: httpx.AsyncClient) -> None:
    wf, base = await new_workflow(client)
    for i in range(2):
        r = await client.put(f"/api/workflows/{wf}/draft", json={"diagram": drawing(str(i))})
        assert r.status_code == 200 and r.json()["revision"] == base + i + 1


async def test_bad_base_revision_is_a_400_naming_the_field(client: httpx.AsyncClient) -> None:
    wf, _ = await new_workflow(client)
    r = await client.put(
        f"/api/workflows/{wf}/draft", json={"diagram": drawing("x"), "base_revision": "one"}
    )
    assert r.status_code == 400, r.text
    assert "base_revision" in r.text
