"""What the API takes (docs/api.md, "Requests"): parameters as the document states them,
each given once; JSON bodies sent as JSON; errors naming what was requested."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.problem_details import check_problem, problem_schema

pytestmark = pytest.mark.integration


async def test_search_parameters_are_documented_and_refused_by_name(
    client: httpx.AsyncClient,
) -> None:
    doc = (await client.get("/schema/openapi.json")).json()
    params = {p["name"]: p for p in doc["paths"]["/api/v1/search"]["get"]["parameters"]}
    limit = params["limit"]["schema"]
    assert (limit["minimum"], limit["maximum"]) == (1, 100), limit
    scopes = params["in"]["schema"]
    assert set(_enum(scopes, doc)) == {"runs", "workflows", "audit"}, scopes
    sorts = params["sort"]["schema"]
    assert set(_enum(sorts, doc)) == {"newest", "oldest", "duration", "relevance", "name"}
    assert "workflows: relevance, name, newest, oldest" in params["sort"]["description"]
    schema = await problem_schema(client)
    for query, name in (
        ({"sort": "bogus"}, "sort"),
        ({"sort": "name"}, "sort"),  # a sort of workflows, not of runs
        ({"in": "everything"}, "in"),
        ({"limit": 101}, "limit"),
        ({"limit": 0}, "limit"),
        ({"q": "sort:bogus"}, "q"),  # a sort written in the query is the query's fault
    ):
        r = await client.get("/api/v1/search", params=query)
        body = check_problem(r, schema, 400)
        assert [e["parameter"] for e in body["errors"]] == [name], (query, body)
    r = await client.get("/api/v1/search", params={"in": "workflows", "sort": "name"})
    assert r.status_code == 200 and r.json()["sort"] == "name", r.text


def _enum(schema: dict, doc: dict) -> list[str]:
    """The allowed values of a parameter's schema (through a ``$ref`` and ``oneOf``)."""
    values: list[str] = []
    for part in schema.get("oneOf", [schema]):
        ref = part.get("$ref")
        if ref:
            part = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
        values += [v for v in part.get("enum", []) if v is not None]
    return values


async def test_a_repeated_single_valued_parameter_is_refused_by_name(
    client: httpx.AsyncClient,
) -> None:
    schema = await problem_schema(client)
    for path in ("/api/v1/runs?limit=5&limit=7", "/api/v1/workflows?archived=true&archived=false"):
        body = check_problem(await client.get(path), schema, 400)
        name = path.split("?")[1].split("=")[0]
        assert body["errors"] == [
            {"detail": "given 2 times; it takes one value", "parameter": name}
        ]
        assert body["detail"] == f"{name}: given 2 times; it takes one value", body
    r = await client.get("/api/v1/search?q=a&q=b")
    assert check_problem(r, schema, 400)["errors"][0]["parameter"] == "q"
    # unknown and repeated together: each named
    body = check_problem(await client.get("/api/v1/runs?limit=1&limit=2&stauts=x"), schema, 400)
    assert [e["parameter"] for e in body["errors"]] == ["stauts", "limit"], body
    assert (await client.get("/api/v1/runs?limit=5")).status_code == 200


async def test_an_alias_error_names_the_path_requested(client: httpx.AsyncClient) -> None:
    schema = await problem_schema(client)
    for path, status in (
        ("/api/runs/not-a-uuid", 400),
        ("/api/runs?limit=0", 400),
        ("/api/workflows/0b6f1c9e-6f55-4c57-9a55-2f7b8f0d4e21", 404),
        ("/api/no-such-thing", 404),
    ):
        r = await client.get(path)
        body = check_problem(r, schema, status)  # instance: the unversioned path
        assert body["instance"] == path.split("?")[0], body
        assert r.headers["sunset"]
    r = await client.post("/api/workflows", json={"name": ""})
    assert check_problem(r, schema, 400)["instance"] == "/api/workflows"
    r = await client.get("/api/v1/runs/not-a-uuid")
    assert check_problem(r, schema, 400)["instance"] == "/api/v1/runs/not-a-uuid"


async def test_a_json_body_sent_as_another_media_type_is_refused_with_415(
    client: httpx.AsyncClient,
) -> None:
    schema = await problem_schema(client)
    raw = b'{"name": "Plain"}'
    for given in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
        headers = {"content-type": given} if given else {}
        r = await client.post("/api/v1/workflows", content=raw, headers=headers)
        body = check_problem(r, schema, 415)
        assert body["errors"][0]["parameter"] == "Content-Type", body
        assert r.headers["accept-post"] == "application/json"
        assert (given or "no Content-Type") in body["detail"], body
    wf = (await client.post("/api/workflows", json={"name": "Typed"})).json()["id"]
    r = await client.patch(
        f"/api/v1/workflows/{wf}", content=b'{"name": "x"}', headers={"content-type": "text/plain"}
    )
    assert check_problem(r, schema, 415) and r.headers["accept-patch"] == "application/json"
    assert (await client.get(f"/api/v1/workflows/{wf}")).json()["name"] == "Typed"
    for given in ("application/json; charset=utf-8", "application/merge-patch+json"):
        r = await client.post("/api/v1/workflows", content=raw, headers={"content-type": given})
        assert r.status_code == 201, (given, r.text)
    r = await client.post(f"/api/v1/workflows/{wf}/publish", headers={"content-type": "text/plain"})
    assert r.status_code != 415, r.text  # no body: the operation's own answer
    doc = (await client.get("/schema/openapi.json")).json()
    assert "415" in doc["paths"]["/api/v1/workflows"]["post"]["responses"]
    assert "415" not in doc["paths"]["/api/v1/workflows"]["get"]["responses"]
