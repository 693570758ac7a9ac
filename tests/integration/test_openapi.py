"""The OpenAPI document and its UI: security schemes, statuses, constraints, offline docs,
``Allow`` on 405 and OPTIONS."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from tests.diagrams import diagram, node

pytestmark = pytest.mark.integration

VENDOR = Path(__file__).parents[2] / "frontend" / "static" / "vendor" / "swagger-ui"


async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200, r.text
    return dict(r.json())


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "responses" in op
    ]


async def test_the_document_is_valid_openapi_3_1(client: httpx.AsyncClient) -> None:
    """The served document validates against the OpenAPI 3.1 schema (openapi-spec-validator),
    as validators and linters read it: every header has its schema, every 201 its
    required ``Location``."""
    doc = await document(client)
    assert doc["openapi"].startswith("3.1")
    validate(doc)
    created = [
        op["responses"]["201"]
        for _, path, op in operations(doc)
        if path.startswith("/api/v1/") and "201" in op["responses"]
    ]
    with_location = [r for r in created if "Location" in r.get("headers", {})]
    assert with_location and all(
        r["headers"]["Location"]["required"] and r["headers"]["Location"]["schema"]
        for r in with_location
    )


UNTYPED_MEDIA = {"application/x-ndjson", "text/event-stream", "*/*"}
"""Answers with no JSON Schema of their body: JSON Lines (the audit export), an event
stream (its events are ``x-itemSchema``), whatever a webhook's Respond step answers."""


async def test_every_json_answer_has_a_schema(client: httpx.AsyncClient) -> None:
    doc = await document(client)
    untyped = [
        (method, path, status, media)
        for method, path, op in operations(doc)
        for status, answer in op["responses"].items()
        for media, content in (answer.get("content") or {}).items()
        if media not in UNTYPED_MEDIA and not content.get("schema")
    ]
    assert untyped == []
    login = doc["paths"]["/api/v1/auth/login"]["post"]["responses"]["200"]
    assert login["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/UserOut"
    }
    for path in ("/hooks/{token}", "/hooks/{token}/{suffix}"):
        accepted = doc["paths"][path]["post"]["responses"]["202"]["content"]["application/json"]
        assert accepted["schema"] == {"$ref": "#/components/schemas/RunLinks"}
        test = doc["paths"][path.replace("/hooks/", "/hooks/test/")]["post"]["responses"]
        assert "202" not in test, test
        assert test["200"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/CapturedTestCall"
        }


async def test_every_list_documents_its_link_header(client: httpx.AsyncClient) -> None:
    doc = await document(client)
    schemas = doc["components"]["schemas"]
    lists = []
    for method, path, op in operations(doc):
        ok = op["responses"].get("200", {})
        ref = ok.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
        component = schemas.get(ref.rsplit("/", 1)[-1], {})
        if {"data", "has_more", "next_cursor", "next"} <= set(component.get("properties", {})):
            lists.append((method, path, "Link" in ok.get("headers", {})))
    assert len(lists) >= 25
    assert [(m, p) for m, p, linked in lists if not linked] == []


async def test_security_schemes_give_the_docs_an_authorize_button(
    client: httpx.AsyncClient,
) -> None:
    doc = await document(client)
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token: `Authorization: Bearer <token>`",
    }
    assert schemes["session"]["type"] == "apiKey" and schemes["session"]["in"] == "cookie"
    assert schemes["session"]["name"] == "railyard_session"
    guarded = [
        op for _, path, op in operations(doc) if path.startswith("/api/") and "login" not in path
    ]
    assert guarded and all(
        op.get("security") == [{"bearer": []}, {"session": []}] for op in guarded
    )


async def test_every_operation_documents_the_statuses_it_can_answer(
    client: httpx.AsyncClient,
) -> None:
    doc = await document(client)
    for method, path, op in operations(doc):
        codes = set(op["responses"])
        where = (method, path, sorted(codes))
        if op.get("security"):
            assert "401" in codes, where
        if method in {"POST", "PUT", "PATCH", "DELETE"} and path.startswith("/api/"):
            assert "403" in codes, where
        if "{" in path:
            assert "404" in codes, where
        if path != "/health/live":
            assert "503" in codes, where
    login = doc["paths"]["/api/v1/auth/login"]["post"]["responses"]
    assert set(login) >= {"200", "401"} and "201" not in login
    publish = doc["paths"]["/api/v1/workflows/{workflow_id}/publish"]["post"]["responses"]
    assert {"200", "201", "422"} <= set(publish)
    hook = doc["paths"]["/hooks/{token}"]["post"]["responses"]
    assert {"202", "405", "413", "429", "default"} <= set(hook)


async def test_request_constraints_match_the_server(client: httpx.AsyncClient) -> None:
    doc = await document(client)
    name = doc["components"]["schemas"]["WorkflowCreate"]["properties"]["name"]
    assert (name["minLength"], name["maxLength"], name["pattern"]) == (1, 200, "\\S")
    assert doc["components"]["schemas"]["Diagram"]["additionalProperties"] is False
    for bad in ("", "   ", "x" * 201):
        r = await client.post("/api/workflows", json={"name": bad})
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["field"] == "name"
    # a run the caller may control (the guard answers 404 for an unknown one first)
    wf = (await client.post("/api/workflows", json={"name": "Rerun me"})).json()["id"]
    d = diagram([node("start", "trigger.manual")], [])
    assert (await client.put(f"/api/workflows/{wf}/draft", json={"diagram": d})).status_code == 200
    assert (await client.post(f"/api/workflows/{wf}/publish")).status_code == 201
    run = (await client.post(f"/api/workflows/{wf}/runs", json={"input": {}})).json()["run_id"]
    r = await client.post(f"/api/runs/{run}/rerun", json={"from": "x"})
    assert r.status_code == 400 and r.json()["field"] == "from"


async def test_docs_ui_is_vendored_and_works_offline(client: httpx.AsyncClient) -> None:
    page = await client.get("/schema", headers={"accept": "text/html"})
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    # the vendored Swagger UI, started by the app's own script (no inline script: the CSP)
    assert urls and all(u.startswith("/static/") for u in urls), urls
    assert {u for u in urls if not u.startswith("/static/vendor/swagger-ui/")} == {
        "/static/js/api-docs.js"
    }
    for url in urls:
        assert (await client.get(url)).status_code == 200, url
    version = (VENDOR / "VERSION").read_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert "Apache License" in (VENDOR / "LICENSE").read_text()


async def test_405_and_options_carry_a_true_allow_header(client: httpx.AsyncClient) -> None:
    r = await client.request("TRACE", "/api/workflows")
    assert r.status_code == 405
    assert set(r.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST", "OPTIONS"}
    for path in ("/api/workflows", "/api/credentials", "/api/tokens"):
        r = await client.options(path)
        assert r.status_code == 204
        assert {"GET", "POST"} <= set(r.headers["allow"].replace(" ", "").split(",")), path
