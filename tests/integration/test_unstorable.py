"""Characters PostgreSQL cannot store (U+0000, lone surrogates) anywhere in a request are
refused with 400 naming the field, leave no row behind, and never answer 500."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

TABLES = ("workflows", "workflow_versions", "runs", "step_runs", "credentials", "audit_log")

NUL_JSON = b"\\u0000"  # the JSON escape, as a client sends it
SURROGATE_JSON = b"\\ud800"


async def row_counts(runtime: Runtime) -> dict[str, int]:
    async with runtime.engine.connect() as conn:
        return {
            t: int((await conn.execute(text(f"select count(*) from {t}"))).scalar_one())
            for t in TABLES
        }


def refused(r: httpx.Response, field: str, *, html: bool = False) -> None:
    assert r.status_code == 400, (field, r.status_code, r.text)
    assert "Traceback" not in r.text
    if html:
        assert r.headers["content-type"].startswith("text/html"), r.headers
        assert "cannot be stored" in r.text
        return
    body = r.json()
    assert body["field"] == field, (body, field)
    assert "cannot be stored" in body["detail"], body


async def test_api_unstorable_characters(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = await publish(
        client,
        diagram(
            [node("hook", "trigger.webhook"), node("set", "control.set", mapping={"b": "=body"})],
            [edge("hook", "set")],
        ),
    )
    hook = wf["webhook_path"]
    before = await row_counts(runtime)
    json_type = {"content-type": "application/json"}
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        # (method, url, request options, the field the answer must name)
        ("POST", hook, {"content": b'{"a": {"b": "x' + NUL_JSON + b'y"}}'}, "body.a.b"),
        ("POST", hook, {"content": b'{"list": [1, "' + SURROGATE_JSON + b'"]}'}, "body.list[1]"),
        ("POST", hook, {"content": b'{"k' + NUL_JSON + b'": 1}'}, "body"),
        ("POST", f"{hook}?tag=a%00b", {"json": {}}, "query.tag"),
        (
            "POST",
            hook,
            {"content": b"line\x00two", "headers": {"content-type": "text/plain"}},
            "body",
        ),
        ("POST", hook, {"data": {"name": "a\x00b"}}, "body.name"),
        (
            "POST",
            "/api/auth/login",
            {"content": b'{"email": "a' + NUL_JSON + b'@x.org", "password": "p"}'},
            "body.email",
        ),
        ("POST", "/api/workflows", {"content": b'{"name": "W' + NUL_JSON + b'"}'}, "body.name"),
        (
            "POST",
            "/api/workflows",
            {"content": b'{"name": "W' + SURROGATE_JSON + b'"}'},
            "body.name",
        ),
        (
            "PATCH",
            f"/api/workflows/{wf['id']}",
            {"content": b'{"name": "' + SURROGATE_JSON + b'"}'},
            "body.name",
        ),
        (
            "POST",
            "/api/credentials",
            {
                "content": b'{"name": "C' + NUL_JSON + b'",'
                b' "type": "bearer", "data": {"token": "t"}}'
            },
            "body.name",
        ),
        ("GET", "/api/runs?status=%00", {}, "query.status"),
        ("GET", "/api/credentials?type=x%00", {}, "query.type"),
    ]
    for method, url, options, field in cases:
        options.setdefault("headers", json_type if "content" in options else {})
        refused(await client.request(method, url, **options), field)

    label = diagram([node("hook", "trigger.webhook", label="Hook\x00")], [])
    r = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": label})
    refused(r, "body.diagram.nodes[0].label")

    page = {"accept": "text/html"}
    refused(await client.get("/runs?status=%00", headers=page), "query.status", html=True)
    token = client.cookies.get("csrftoken") or ""
    r = await client.post(
        "/login",
        data={"email": "a\x00@x.org", "password": "p", "_csrf_token": token},
        headers=page,
    )
    refused(r, "body.email", html=True)

    assert await row_counts(runtime) == before
    # the same requests without the character still work
    r = await client.post(hook, json={"a": {"b": "xy"}})
    assert r.status_code == 202, r.text
    r = await client.post("/api/workflows", json={"name": "W"})
    assert r.status_code == 201, r.text


async def test_a_step_output_that_cannot_be_stored_fails_the_step_once(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    """A third-party API answering a NUL (or a connector erring with one) fails the step
    with a clear error instead of a completion the database refuses on every retry."""
    sink.response = {"items": [{"name": "ok"}, {"name": "a\x00b"}]}
    wf = await publish(
        client,
        diagram(
            [node("hook", "trigger.webhook"), node("call", "http.request", url=sink.url)],
            [edge("hook", "call")],
        ),
    )
    run_id = (await client.post(wf["webhook_path"], json={})).json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    step = steps_by_id(await run_detail(client, run_id))["call"]
    assert step["error"]["kind"] == "unstorable_output", step
    assert "output.body.items[1].name contains U+0000" in step["error"]["message"]
    assert len(sink.requests) == 1  # not retried
