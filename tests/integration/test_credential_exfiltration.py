"""The secret-exfiltration path is closed: a workflow may reference a credential only if
the user saving it, the user publishing it and, at run time, the publisher of the running
version may use it (docs/security.md)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import run_detail, steps_by_id
from tests.integration.rbac import client_as, grant, make_user, revoke

pytestmark = pytest.mark.integration

SECRET = "sk-admin-only-7f3c2b1a"


async def _admin_credential(client: httpx.AsyncClient) -> str:
    r = await client.post(
        "/api/credentials",
        json={"name": "Admin key", "type": "api_key", "data": {"api_key": SECRET}},
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _stealing(url: str, credential_id: str) -> dict[str, Any]:
    """Webhook -> HTTP Request sending the credential to ``url`` (the attacker's endpoint)."""
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "http.request", method="POST", url=url, credential=credential_id),
        ],
        [edge("hook", "call")],
    )


def _received_secret(sink: HttpSink) -> bool:
    return any(SECRET in json.dumps(r.headers) + r.body.decode() for r in sink.requests)


async def test_credential_exfiltration_refused_at_save(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime, sink: HttpSink
) -> None:
    cred = await _admin_credential(client)
    async with client_as(settings, runtime, "ed@example.com", "editor") as editor:
        wf = (await editor.post("/api/workflows", json={"name": "mine"})).json()
        r = await editor.put(
            f"/api/workflows/{wf['id']}/draft",
            json={"diagram": _stealing(sink.url, cred)},
        )
        assert r.status_code == 403, r.text
        assert r.json()["field"] == "call.credential"
        assert "may not use credential" in r.json()["detail"]
        # the editor does not even see the credential in lists or pickers
        assert (await editor.get("/api/credentials")).json() == []
        assert (await editor.get(f"/api/credentials/{cred}")).status_code == 404
    async with client_as(settings, runtime, "view@example.com", "viewer") as viewer:
        assert (await viewer.post("/api/workflows", json={"name": "x"})).status_code == 403
        r = await viewer.put(
            f"/api/workflows/{wf['id']}/draft", json={"diagram": _stealing(sink.url, cred)}
        )
        assert r.status_code == 404  # not readable: not even confirmed to exist
    assert not _received_secret(sink)


async def test_credential_exfiltration_refused_at_publish(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime, sink: HttpSink
) -> None:
    cred = await _admin_credential(client)
    editor_id = await make_user(runtime, "ed@example.com", "editor")
    use = await grant(runtime, "credential", cred, f"user:{editor_id}", "use")
    async with client_as(settings, runtime, "ed@example.com") as editor:
        wf = (await editor.post("/api/workflows", json={"name": "mine"})).json()
        r = await editor.put(
            f"/api/workflows/{wf['id']}/draft", json={"diagram": _stealing(sink.url, cred)}
        )
        assert r.status_code == 200 and r.json()["ok"], r.text
        await revoke(runtime, "credential", cred, use)
        r = await editor.post(f"/api/workflows/{wf['id']}/publish")
        assert r.status_code == 403, r.text
        assert (await editor.get(f"/api/workflows/{wf['id']}/versions")).json() == []


async def test_credential_exfiltration_refused_when_editing_anothers_workflow(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime, sink: HttpSink
) -> None:
    """Edit on an admin's workflow that uses the admin's credential: the editor may change
    the URL in its draft, but not publish it."""
    cred = await _admin_credential(client)
    wf = (await client.post("/api/workflows", json={"name": "admin's"})).json()
    safe = _stealing("https://api.example.com/", cred)
    assert (await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": safe})).json()[
        "ok"
    ]
    assert (await client.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    editor_id = await make_user(runtime, "ed@example.com", "editor")
    await grant(runtime, "workflow", wf["id"], f"user:{editor_id}", "edit")
    async with client_as(settings, runtime, "ed@example.com") as editor:
        r = await editor.put(
            f"/api/workflows/{wf['id']}/draft", json={"diagram": _stealing(sink.url, cred)}
        )
        assert r.status_code == 200, r.text  # the reference was there already
        r = await editor.post(f"/api/workflows/{wf['id']}/publish")
        assert r.status_code == 403, r.text
        assert "may not use credential" in r.json()["detail"]


async def test_credential_exfiltration_refused_at_run(
    client: httpx.AsyncClient,
    settings: Settings,
    runtime: Runtime,
    worker: Any,
    sink: HttpSink,
) -> None:
    cred = await _admin_credential(client)
    editor_id = await make_user(runtime, "ed@example.com", "editor")
    use = await grant(runtime, "credential", cred, f"user:{editor_id}", "use")
    async with client_as(settings, runtime, "ed@example.com") as editor:
        wf = (await editor.post("/api/workflows", json={"name": "mine"})).json()
        r = await editor.put(
            f"/api/workflows/{wf['id']}/draft", json={"diagram": _stealing(sink.url, cred)}
        )
        assert r.json()["ok"], r.text
        published = await editor.post(f"/api/workflows/{wf['id']}/publish")
        assert published.status_code == 201, published.text
        # The grant is revoked after publishing: the next run stops at the step.
        await revoke(runtime, "credential", cred, use)
        r = await editor.post(f"/api/workflows/{wf['id']}/runs", json={"input": {}})
        assert r.status_code == 201, r.text
        run_id = r.json()["run_id"]
        assert await wait_for_run(runtime, run_id) == "failed"
        step = steps_by_id(await run_detail(editor, run_id))["call"]
        assert step["error"]["kind"] == "credential_not_granted"
        assert "ed@example.com" in step["error"]["message"]
    assert sink.requests == []
    assert not _received_secret(sink)


async def test_credential_exfiltration_through_a_subworkflow_refused(
    client: httpx.AsyncClient,
    settings: Settings,
    runtime: Runtime,
    worker: Any,
    sink: HttpSink,
) -> None:
    """An admin's workflow sends its credential to the URL in its input; an editor may not
    call it as a sub-workflow without a run grant (save), nor once the grant is revoked
    (run: the call fails, naming the publisher who may not run it)."""
    cred = await _admin_credential(client)
    relay = (await client.post("/api/workflows", json={"name": "relay"})).json()
    d = diagram(
        [
            node("start", "trigger.manual"),
            node("call", "http.request", method="POST", url="=$.url", credential=cred),
        ],
        [edge("start", "call")],
    )
    assert (await client.put(f"/api/workflows/{relay['id']}/draft", json={"diagram": d})).json()[
        "ok"
    ]
    assert (await client.post(f"/api/workflows/{relay['id']}/publish")).status_code == 201
    caller = diagram(
        [
            node("start", "trigger.manual"),
            node("sub", "control.subworkflow", workflow_id=relay["id"]),
        ],
        [edge("start", "sub")],
    )
    editor_id = await make_user(runtime, "ed@example.com", "editor")
    async with client_as(settings, runtime, "ed@example.com") as editor:
        wf = (await editor.post("/api/workflows", json={"name": "mine"})).json()
        r = await editor.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": caller})
        assert r.status_code == 403 and r.json()["field"] == "sub.workflow_id", r.text
        run_grant = await grant(runtime, "workflow", relay["id"], f"user:{editor_id}", "run")
        r = await editor.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": caller})
        assert r.json()["ok"], r.text
        assert (await editor.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
        await revoke(runtime, "workflow", relay["id"], run_grant)
        r = await editor.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"url": sink.url}})
        run_id = r.json()["run_id"]
        assert await wait_for_run(runtime, run_id) == "failed"
        step = steps_by_id(await run_detail(editor, run_id))["sub"]
        assert "may not run workflow" in step["error"]["message"], step["error"]
        # nor as the error workflow of its own workflow
        r = await editor.patch(
            f"/api/workflows/{wf['id']}", json={"settings": {"error_workflow_id": relay["id"]}}
        )
        assert r.status_code == 403, r.text
    assert sink.requests == []
