"""Pagination the importer reads beyond links, query cursors and page numbers: cursors in
the JSON request body (Notion's ``start_cursor`` / ``next_cursor`` / ``has_more``) and
offsets (Jira's ``startAt`` / ``maxResults`` / ``total``; Outline's ``offset`` / ``limit``
in the body), each against a local API answering as its document says, with the
"fetch all pages" option and its cap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from connectors import sdk
from connectors.builtin.saas import jira, notion
from connectors.openapi.importer import build_definition
from connectors.openapi.loading import load_document
from connectors.openapi.runtime import connector_of
from connectors.testing import ActionTestEnvironment
from tests.openapi_server import Call, ScriptedApi, document_bytes

PROJECTS = [{"id": str(n), "key": f"P{n}", "name": f"Project {n}"} for n in range(5)]
ROWS = [{"id": f"page-{n}", "object": "page"} for n in range(5)]
NOTION = {"type": "notion.token", "token": "secret_1"}
JIRA = {"type": "jira.basic_auth", "username": "me@example.com", "password": "tok"}


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    server = ScriptedApi().start()
    yield server
    server.stop()


async def _run(
    connector: sdk.Connector,
    node_type: str,
    api: ScriptedApi,
    config: dict[str, Any],
    credential: dict[str, Any] | None = None,
) -> Any:
    action = connector.get(node_type)
    assert action is not None
    env = ActionTestEnvironment(
        settings={f"{connector.name}.api_url": api.url},
        credentials={"c": credential} if credential else {},
        credential_types=list(connector.credential_types),
    )
    return await env.run(action, {**({"credential": "c"} if credential else {}), **config}, None)


def notion_query(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
    """Notion's database query: ``start_cursor`` and ``page_size`` (default 100) in the
    body; a page of ``results`` with ``next_cursor`` and ``has_more``."""
    body = call.json()
    start = int(body.get("start_cursor") or 0)
    end = start + int(body.get("page_size") or 100)
    more = end < len(ROWS)
    page = {"object": "list", "results": ROWS[start:end], "has_more": more}
    return 200, {**page, "next_cursor": str(end) if more else None}, {}


def jira_projects(server_cap: int = 1000) -> Any:
    """Jira's project search: ``startAt`` (default 0) and ``maxResults`` (default 50,
    lowered to ``server_cap`` as Jira lowers it) in the query; ``values``, ``startAt``,
    ``maxResults``, ``total`` and ``isLast``."""

    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        query = dict(call.query)
        start = int(query.get("startAt", 0))
        size = min(int(query.get("maxResults", 50)), server_cap)
        values = PROJECTS[start : start + size]
        last = start + size >= len(PROJECTS)
        page = {"startAt": start, "maxResults": size, "total": len(PROJECTS), "isLast": last}
        return 200, {**page, "values": values}, {}

    return answer


def test_the_documents_declare_body_cursors_and_offsets() -> None:
    query = notion.definition.operation("query_database")
    assert query is not None and query.pagination is not None
    assert (query.pagination.kind, query.pagination.param_in) == ("cursor", "body")
    assert query.pagination.next_path == ["next_cursor"]
    assert query.pagination.has_more_path == ["has_more"]
    projects = jira.definition.operation("search_projects")
    assert projects is not None and projects.pagination is not None
    assert projects.pagination.kind == "offset"
    assert (projects.pagination.param, projects.pagination.size_param) == ("startAt", "maxResults")
    assert projects.pagination.total_path == ["total"]
    fields = notion.connector.get("notion.query_database").config_json_schema()["properties"]  # type: ignore[union-attr]
    assert fields["fetch_all_pages"]["type"] == "boolean"
    assert fields["max_pages"]["maximum"] == 1000


async def test_notion_body_cursor_fetches_every_page(api: ScriptedApi) -> None:
    api.answer = notion_query
    out = await _run(
        notion.connector,
        "notion.query_database",
        api,
        {
            "database_id": "db1",
            "filter": {"property": "Done", "checkbox": {"equals": False}},
            "page_size": 2,
            "fetch_all_pages": True,
        },
        NOTION,
    )
    assert [r["id"] for r in out["results"]] == [r["id"] for r in ROWS]
    assert out["has_more"] is False
    bodies = [c.json() for c in api.calls]
    assert [b.get("start_cursor") for b in bodies] == [None, "2", "4"]
    # every page repeats the filter and the page size: only the cursor moves
    assert {json.dumps(b["filter"], sort_keys=True) for b in bodies} == {
        '{"checkbox": {"equals": false}, "property": "Done"}'
    }
    assert {b["page_size"] for b in bodies} == {2}
    assert {(c.method, c.path) for c in api.calls} == {("POST", "/databases/db1/query")}


async def test_notion_body_cursor_stops_at_the_cap_and_without_the_option(
    api: ScriptedApi,
) -> None:
    api.answer = notion_query
    config = {"database_id": "db1", "page_size": 1}
    out = await _run(
        notion.connector,
        "notion.query_database",
        api,
        {**config, "fetch_all_pages": True, "max_pages": 3},
        NOTION,
    )
    assert [r["id"] for r in out["results"]] == ["page-0", "page-1", "page-2"]
    assert out["has_more"] is True  # the last page fetched says so: more may follow
    assert len(api.calls) == 3
    api.calls.clear()
    out = await _run(notion.connector, "notion.query_database", api, config, NOTION)
    assert [r["id"] for r in out["results"]] == ["page-0"]
    assert len(api.calls) == 1


async def test_jira_offsets_follow_start_at_until_the_total(api: ScriptedApi) -> None:
    api.answer = jira_projects()
    out = await _run(
        jira.connector,
        "jira.search_projects",
        api,
        {"max_results": 2, "fetch_all_pages": True},
        JIRA,
    )
    assert [p["key"] for p in out["values"]] == [p["key"] for p in PROJECTS]
    assert [dict(c.query).get("startAt") for c in api.calls] == [None, "2", "4"]
    assert {dict(c.query)["maxResults"] for c in api.calls} == {"2"}
    api.calls.clear()
    # a first offset given by the step: the pages follow on from it
    out = await _run(
        jira.connector,
        "jira.search_projects",
        api,
        {"start_at": 1, "max_results": 3, "fetch_all_pages": True},
        JIRA,
    )
    assert [p["key"] for p in out["values"]] == ["P1", "P2", "P3", "P4"]
    assert [dict(c.query)["startAt"] for c in api.calls] == ["1", "4"]
    api.calls.clear()
    out = await _run(
        jira.connector,
        "jira.search_projects",
        api,
        {"max_results": 1, "fetch_all_pages": True, "max_pages": 2},
        JIRA,
    )
    assert [p["key"] for p in out["values"]] == ["P0", "P1"]
    assert len(api.calls) == 2


async def test_jira_offsets_trust_the_total_over_a_short_page(api: ScriptedApi) -> None:
    """Jira may return fewer than ``maxResults`` asked for (it caps the page size): the
    declared ``total`` decides when to stop, not the page's length."""

    api.answer = jira_projects(server_cap=2)
    out = await _run(
        jira.connector,
        "jira.search_projects",
        api,
        {"max_results": 50, "fetch_all_pages": True},
        JIRA,
    )
    assert [p["key"] for p in out["values"]] == [p["key"] for p in PROJECTS]
    assert [dict(c.query).get("startAt") for c in api.calls] == [None, "2", "4"]


async def test_outline_offsets_in_the_body_stop_at_a_short_page(api: ScriptedApi) -> None:
    """Outline's published document: ``offset`` and ``limit`` in the JSON body, no total;
    a page shorter than the limit is the last."""
    doc, version = load_document(document_bytes("outline"))
    connector = connector_of([(build_definition(doc, name="outline", openapi_version=version), {})])
    docs = [{"id": f"d{n}", "title": f"Doc {n}"} for n in range(5)]

    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        body = call.json()
        start, size = int(body.get("offset", 0)), int(body.get("limit", 25))
        page = {"offset": start, "limit": size}
        return 200, {"data": docs[start : start + size], "pagination": page}, {}

    api.answer = answer
    out = await _run(
        connector,
        "outline.documents_list",
        api,
        {"limit": 2, "fetch_all_pages": True},
        {
            "type": "outline.oauth2",
            "client_id": "id",
            "client_secret": "s",
            "access_token": "tok",
            "token_type": "bearer",
        },
    )
    assert [d["id"] for d in out["data"]] == [d["id"] for d in docs]
    assert [c.json() for c in api.calls] == [
        {"limit": 2},
        {"limit": 2, "offset": 2},
        {"limit": 2, "offset": 4},
    ]


async def test_a_body_parameter_declared_for_a_form_body_is_a_clear_error(
    api: ScriptedApi,
) -> None:
    document = """
openapi: 3.0.3
info: {title: Forms, version: "1"}
servers: [{url: "https://forms.example"}]
paths:
  /search:
    post:
      operationId: search
      x-railyard-pagination: {kind: cursor, items: rows, param: after, in: body, next: next}
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: {type: object, properties: {q: {type: string}, after: {type: string}}}
      responses:
        "200":
          description: a page
          content:
            application/json:
              schema:
                type: object
                properties: {rows: {type: array, items: {type: object}}, next: {type: string}}
"""
    doc, version = load_document(document.encode())
    connector = connector_of([(build_definition(doc, name="forms", openapi_version=version), {})])
    api.answer = lambda call, url: (200, {"rows": [{"n": 1}], "next": "c2"}, {})
    with pytest.raises(sdk.NonRetryableError) as caught:
        await _run(connector, "forms.search", api, {"q": "x", "fetch_all_pages": True})
    assert caught.value.kind == "pagination_body"
    assert len(api.calls) == 1  # the first page only
