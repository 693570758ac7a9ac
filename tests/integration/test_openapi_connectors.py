"""An admin imports an OpenAPI document as a connector through the API; a workflow calls
one of its operations with "fetch all pages" on a worker (another process's catalog);
a re-import shows what changed and the published workflow keeps the version it was
built with."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, start_manual, steps_by_id
from tests.openapi_server import Call, ScriptedApi

pytestmark = pytest.mark.integration

V1 = """
openapi: 3.0.3
info: {title: Acme, version: "1"}
servers: [{url: "SERVER"}]
security: [{token: []}]
components:
  securitySchemes:
    token: {type: http, scheme: bearer}
    oidc: {type: openIdConnect, openIdConnectUrl: "https://acme.example/.well-known"}
paths:
  /items:
    get:
      operationId: listItems
      summary: List items
      parameters: [{name: cursor, in: query, schema: {type: string}}STATUS]
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                type: object
                properties:
                  items:
                    type: array
                    items: {type: object, properties: {id: {type: string}, name: {type: string}}}
                  next_cursor: {type: string, nullable: true}
  /items/{id}:
    get:
      operationId: OTHER
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /admin:
    get:
      operationId: admin
      security: [{oidc: []}]
      responses: {"200": {description: ok}}
"""


def _document(server: str, *, status: bool = False, other: str = "getItem") -> str:
    extra = ", {name: status, in: query, required: true, schema: {type: string}}"
    return (
        V1.replace("SERVER", server)
        .replace("STATUS", extra if status else "")
        .replace("OTHER", other)
    )


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        if dict(call.query).get("cursor") == "2":
            return 200, {"items": [{"id": "3", "name": "c"}], "next_cursor": None}, {}
        return 200, {"items": [{"id": "1", "name": "a"}, {"id": "2"}], "next_cursor": "2"}, {}

    server = ScriptedApi(answer=answer).start()
    yield server
    server.stop()


async def _run(client: httpx.AsyncClient, runtime: Runtime, wf: dict[str, Any]) -> Any:
    run_id = await start_manual(client, wf, {})
    assert await wait_for_run(runtime, run_id) == "succeeded"
    return steps_by_id(await run_detail(client, run_id))["list"]["output"]


async def test_import_run_fetch_all_pages_and_reimport(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, api: ScriptedApi
) -> None:
    r = await client.post(
        "/api/admin/connectors", json={"name": "acme", "document": _document(api.url)}
    )
    assert r.status_code == 201, r.text
    result = r.json()
    assert (result["version"], result["stored"], result["imported"]) == (1, True, 2)
    assert result["refused"] == [
        {
            "method": "GET",
            "path": "/admin",
            "operation_id": "admin",
            "reason": "security scheme oidc: type 'openIdConnect' is not supported",
        }
    ]
    assert result["credential_types"] == ["acme.token"]
    catalog = (await client.get("/api/catalog")).json()
    spec = next(n for n in catalog["node_types"] if n["type"] == "acme.list_items")
    assert spec["output_schema"]["properties"]["items"]["type"] == "array"
    assert {"cursor", "fetch_all_pages", "max_pages", "credential"} <= set(
        spec["config_schema"]["properties"]
    )
    cred = await client.post(
        "/api/credentials", json={"name": "Acme", "type": "acme.token", "data": {"token": "s3"}}
    )
    assert cred.status_code == 201, cred.text
    listing = node("list", "acme.list_items", credential=cred.json()["id"], fetch_all_pages=True)
    wf = await publish(
        client, diagram([node("start", "trigger.manual"), listing], [edge("start", "list")])
    )

    output = await _run(client, runtime, wf)  # the worker's catalog had not seen acme
    assert [i["id"] for i in output["items"]] == ["1", "2", "3"]
    assert [dict(c.query).get("cursor") for c in api.calls] == [None, "2"]
    assert {c.headers["authorization"] for c in api.calls} == {"Bearer s3"}

    changed = _document(api.url, status=True, other="fetchItem")
    diff = await client.post("/api/admin/connectors/acme/diff", json={"document": changed})
    assert diff.status_code == 200, diff.text
    changes = diff.json()["changes"]
    assert changes["changed"] == {"list_items": ["field status added"]}
    assert (changes["added"], changes["removed"]) == (["fetch_item"], ["get_item"])
    assert diff.json()["stored"] is False

    again = await client.post("/api/admin/connectors", json={"name": "acme", "document": changed})
    assert again.status_code == 201, again.text
    versions = {o["node_type"]: o["version"] for o in again.json()["operations"]}
    assert versions == {"acme.list_items": 2, "acme.fetch_item": 1}
    same = await client.post("/api/admin/connectors", json={"name": "acme", "document": changed})
    assert (same.json()["version"], same.json()["stored"]) == (2, False)

    detail = (await client.get("/api/admin/connectors/acme")).json()
    assert [v["number"] for v in detail["versions"]] == [2, 1]
    catalog = (await client.get("/api/catalog")).json()
    spec = next(n for n in catalog["node_types"] if n["type"] == "acme.list_items")
    assert spec["version"] == 2 and "status" in spec["config_schema"]["required"]

    api.calls.clear()
    output = await _run(client, runtime, wf)  # published with version 1: no status sent
    assert [i["id"] for i in output["items"]] == ["1", "2", "3"]
    assert all("status" not in dict(c.query) for c in api.calls)


async def test_bad_documents_and_names_are_refused(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/api/admin/connectors", json={"name": "acme", "document": "a: &x [1]\nb: *x\n"}
    )
    assert r.status_code == 400
    body = r.json()
    assert body["field"] == "document" and body["detail"].endswith("(at line 1, column 4)")
    assert body["detail"].startswith("YAML anchor &x is not accepted")
    r = await client.post("/api/admin/connectors", json={"name": "http", "document": "{}"})
    assert (r.status_code, r.json()["field"]) == (400, "name")
    assert "taken by the built-in connector http" in r.json()["detail"]
    r = await client.post(
        "/api/admin/connectors", json={"name": "acme", "url": "ftp://example.com/x"}
    )
    assert (r.status_code, r.json()["field"]) == (400, "url")
    r = await client.post("/api/admin/connectors", json={"name": "acme"})
    assert (r.status_code, r.json()["detail"]) == (400, "give the document as text or its url")
    r = await client.post(
        "/api/admin/connectors", json={"name": "acme", "document": "{}", "url": "https://x.test"}
    )
    assert r.json()["detail"] == "give the document as text or its url, not both"
    # over the server's default 10 MB body cap, refused by the document's own 16 MiB limit
    huge = "openapi: 3.0.3\nx-pad: '" + "a" * (17 * 1024 * 1024) + "'\n"
    r = await client.post("/api/admin/connectors", json={"name": "acme", "document": huge})
    assert (r.status_code, r.json()["field"]) == (400, "document")
    assert r.json()["detail"].endswith("bytes; at most 16,777,216 are accepted")
    assert (await client.get("/api/admin/connectors/nothing")).status_code == 404


async def test_import_from_a_url(client: httpx.AsyncClient, api: ScriptedApi) -> None:
    document = _document(api.url).encode()
    api.answer = lambda call, url: (200, document, {})
    r = await client.post(
        "/api/admin/connectors", json={"name": "acme_url", "url": f"{api.url}/openapi.yaml"}
    )
    assert r.status_code == 201, r.text
    assert r.json()["imported"] == 2
    assert [(c.method, c.path) for c in api.calls] == [("GET", "/openapi.yaml")]
    listed = (await client.get("/api/admin/connectors")).json()
    assert listed[0]["versions"][0]["source_url"] == f"{api.url}/openapi.yaml"
    api.answer = lambda call, url: (200, b"x" * (17 * 1024 * 1024), {})
    r = await client.post(
        "/api/admin/connectors", json={"name": "acme_url", "url": f"{api.url}/huge"}
    )
    assert r.status_code == 400
    assert r.json()["detail"].endswith("/huge exceeds 10485760 bytes")  # the guard's cap


async def test_admin_page_imports_an_upload(client: httpx.AsyncClient, api: ScriptedApi) -> None:
    page = await client.get("/admin/connectors")
    assert page.status_code == 200 and "No connector imported yet." in page.text
    csrf = client.headers["x-csrftoken"]
    files = {"file": ("acme.yaml", _document(api.url).encode(), "application/yaml")}
    form = {"_csrf_token": csrf, "name": "acme", "label": "Acme Inc."}
    r = await client.post("/admin/connectors", data=form, files=files)
    assert r.status_code == 200, r.text
    assert "Stored as version 1." in r.text
    assert "2 operations imported, 1 refused." in r.text
    assert "security scheme oidc: type &#39;openIdConnect&#39; is not supported" in r.text
    detail = await client.get("/admin/connectors/acme")
    assert 'data-node-type="acme.list_items"' in detail.text
    assert (await client.get("/admin/connectors/nothing")).status_code == 404
    bad = {"file": ("x.yaml", b"openapi: [", "application/yaml")}
    r = await client.post("/admin/connectors", data=form, files=bad)
    assert r.status_code == 400
    assert "the document is neither JSON nor valid YAML" in r.text
