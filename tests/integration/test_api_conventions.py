"""The API's conventions (docs/api.md), checked on every route of the router, so a new
route that breaks one fails here:

- every error answer is RFC 9457 problem details, valid against the document's
  ``Problem`` component, sent as ``application/problem+json``;
- every API route lives under ``/api/v1``; the unversioned paths of before answer the
  same, marked deprecated with their sunset date;
- every ``/api`` route refuses a query parameter it does not declare with a 400 naming it;
- every request body type refuses unknown fields, nested ones included.
"""

from __future__ import annotations

import types
import typing
import uuid
from typing import Any

import httpx
import msgspec
import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute

from backend.api.locations import LOCATIONS
from backend.api.strict_query import ALLOWED, OPEN_QUERY
from backend.api.versioning import PREFIX, SUNSET
from backend.app import create_app
from backend.problems import MEDIA_TYPE
from backend.settings import Settings
from tests.integration.problem_details import check_problem, problem_schema

pytestmark = pytest.mark.integration


def api_handlers(app: Litestar) -> list[tuple[str, str, Any]]:
    """``(method, path, handler)`` of every ``/api`` route of ``app``."""
    return [
        (method, route.path, handler)
        for route in app.routes
        if isinstance(route, HTTPRoute) and route.path.startswith("/api/")
        for method, (handler, _) in route.route_handler_map.items()
        if method not in ("OPTIONS", "HEAD")
    ]


def test_every_api_route_declares_its_query_parameters(settings: Settings) -> None:
    app = create_app(settings)
    unguarded = [
        (method, path)
        for method, path, handler in api_handlers(app)
        if handler.operation_id not in OPEN_QUERY and ALLOWED not in handler.opt
    ]
    assert unguarded == []


def test_every_api_route_is_versioned(settings: Settings) -> None:
    app = create_app(settings)
    unversioned = [
        (method, path) for method, path, _ in api_handlers(app) if not path.startswith(PREFIX + "/")
    ]
    assert unversioned == []


async def test_unversioned_paths_are_deprecated_aliases(client: httpx.AsyncClient) -> None:
    wf = (await client.post("/api/v1/workflows", json={"name": "Aliased"})).json()
    old = await client.get(f"/api/workflows/{wf['id']}")
    new = await client.get(f"/api/v1/workflows/{wf['id']}")
    assert old.status_code == new.status_code == 200
    assert old.json() == new.json()
    assert "deprecation" not in new.headers and "sunset" not in new.headers
    assert old.headers["deprecation"].startswith("@")
    assert old.headers["sunset"] == SUNSET.strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert old.headers["link"] == f'</api/v1/workflows/{wf["id"]}>; rel="successor-version"'
    # a list in the old shape (a bare array) has no next page; its successor keeps the query
    await client.post("/api/v1/workflows", json={"name": "Aliased too"})
    listed = await client.get("/api/workflows", params={"limit": 1})
    assert isinstance(listed.json(), list)
    assert listed.headers.get_list("link") == [
        '</api/v1/workflows?limit=1>; rel="successor-version"'
    ]
    # errors too; the OAuth2 redirect URI is no alias (providers keep it registered)
    assert (await client.get("/api/nope")).headers["sunset"]
    callback = await client.get("/api/credentials/oauth2/callback", params={"state": "x"})
    assert "sunset" not in callback.headers


def _structs(annotation: Any, seen: set[type]) -> list[type]:
    """Every msgspec Struct type reachable from ``annotation``."""
    found: list[type] = []
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        if annotation in seen:
            return found
        seen.add(annotation)
        found.append(annotation)
        for field in msgspec.structs.fields(annotation):
            found += _structs(field.type, seen)
        return found
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _structs(typing.get_args(annotation)[0], seen)
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _structs(arg, seen)
    return found


def test_every_request_body_refuses_unknown_fields(settings: Settings) -> None:
    app = create_app(settings)
    lenient: list[str] = []
    for method, path, handler in api_handlers(app):
        data = handler.parsed_fn_signature.parameters.get("data")
        if data is None:
            continue
        hints = typing.get_type_hints(handler.fn, include_extras=True)
        for struct in _structs(hints.get("data", data.annotation), set()):
            if not struct.__struct_config__.forbid_unknown_fields:
                lenient.append(f"{method} {path}: {struct.__name__}")
    assert lenient == []


async def test_unknown_query_parameters_and_body_fields_are_refused_by_name(
    client: httpx.AsyncClient,
) -> None:
    schema = await problem_schema(client)
    for path in ("/api/v1/workflows", "/api/v1/runs", "/api/v1/credentials", "/api/v1/tokens"):
        r = await client.get(path, params={"stauts": "failed"})
        body = check_problem(r, schema, 400)
        assert body["errors"] == [{"detail": body["errors"][0]["detail"], "parameter": "stauts"}], (
            body
        )
        assert "stauts" in body["detail"]
    r = await client.post("/api/v1/workflows", json={"name": "x", "colour": "red"})
    body = check_problem(r, schema, 400)
    assert body["errors"][0]["pointer"] == "#/colour", body
    wf = (await client.post("/api/v1/workflows", json={"name": "Typo"})).json()["id"]
    r = await client.post(f"/api/v1/workflows/{wf}/runs", json={"inputs": {}})
    assert check_problem(r, schema, 400)["errors"][0]["pointer"] == "#/inputs"


async def test_error_answers_are_problem_details(client: httpx.AsyncClient) -> None:
    """A sample of bad requests, one per kind of refusal, each against the component."""
    schema = await problem_schema(client)
    missing = uuid.uuid4()
    check_problem(await client.get(f"/api/v1/workflows/{missing}"), schema, 404)
    check_problem(await client.get("/api/v1/no-such-thing"), schema, 404)
    r = await client.request("TRACE", "/api/v1/workflows")
    check_problem(r, schema, 405)
    assert "GET" in r.headers["allow"]
    check_problem(await client.get("/api/v1/runs", params={"limit": "many"}), schema, 400)
    check_problem(await client.get("/api/v1/runs", params={"cursor": "nope"}), schema, 400)
    for name in ("One", "Two"):  # a cursor another list handed out is not this list's
        await client.post("/api/v1/workflows", json={"name": name})
    other = (await client.get("/api/v1/workflows", params={"limit": 1})).json()["next_cursor"]
    r = await client.get("/api/v1/runs", params={"cursor": other})
    assert check_problem(r, schema, 400)["errors"][0]["parameter"] == "cursor"
    r = await client.post("/api/v1/workflows", json={"name": ""})
    assert check_problem(r, schema, 400)["errors"][0]["pointer"] == "#/name"
    r = await client.post(
        "/api/v1/workflows", content=b"{not json", headers={"content-type": "application/json"}
    )
    body = check_problem(r, schema, 400)
    assert [e["pointer"] for e in body["errors"]] == ["#"] and "byte" in body["detail"], body
    r = await client.post("/api/v1/workflows")  # no body at all
    body = check_problem(r, schema, 400)
    assert body["detail"] == "the request needs a JSON body", body
    assert [e["pointer"] for e in body["errors"]] == ["#"], body
    wf = (await client.post("/api/v1/workflows", json={"name": "Unpublished"})).json()["id"]
    r = await client.post(f"/api/v1/workflows/{wf}/runs", json={"input": {}})
    assert check_problem(r, schema, 409)["type"] == "urn:railyard:problem:state-conflict"
    r = await client.put(
        f"/api/v1/workflows/{wf}/draft",
        json={"diagram": {"nodes": [], "edges": []}, "base_revision": 99},
    )
    body = check_problem(r, schema, 409)
    assert body["revision"] == 0
    anonymous = httpx.AsyncClient(transport=client._transport, base_url=str(client.base_url))
    async with anonymous:
        r = await anonymous.get("/api/v1/workflows")
        check_problem(r, schema, 401)
        assert r.headers["www-authenticate"] == 'Bearer realm="railyard"'  # RFC 9110 11.6.1
    del client.headers["x-csrftoken"]
    check_problem(await client.post("/api/v1/workflows", json={"name": "x"}), schema, 403)


async def test_every_error_status_is_documented_as_the_problem_component(
    client: httpx.AsyncClient,
) -> None:
    doc = (await client.get("/schema/openapi.json")).json()
    wrong = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            if path.startswith("/api/"):
                assert "400" in op["responses"], (method, path)
            for status, answer in op["responses"].items():
                if not status.isdigit() or int(status) < 400:
                    continue
                content = answer.get("content", {})
                if path.startswith("/hooks/") and "*/*" in content:
                    continue  # a webhook's run failure answers what its run says
                schema = content.get(MEDIA_TYPE, {}).get("schema", {})
                if set(content) != {MEDIA_TYPE} or schema != {
                    "$ref": "#/components/schemas/Problem"
                }:
                    wrong.append((method.upper(), path, status, sorted(content)))
    assert wrong == []


async def test_bad_filter_and_limit_values_are_refused_not_clamped(
    client: httpx.AsyncClient,
) -> None:
    schema = await problem_schema(client)
    for params in ({"limit": 0}, {"limit": 1001}, {"limit": -1}, {"status": "bogus"}):
        body = check_problem(await client.get("/api/v1/runs", params=params), schema, 400)
        assert body["errors"][0]["parameter"] == next(iter(params)), body
    assert (await client.get("/api/v1/runs", params={"limit": 1000})).status_code == 200
    assert (await client.get("/api/v1/runs", params={"status": "failed"})).status_code == 200


def test_every_creating_operation_says_where_its_object_lives(settings: Settings) -> None:
    app = create_app(settings)
    created = {
        handler.operation_id
        for _, _, handler in api_handlers(app)
        if handler.status_code == 201 and handler.resolve_include_in_schema()
    }
    assert created - set(LOCATIONS) == set()


async def test_201_answers_carry_the_location_of_what_they_created(
    client: httpx.AsyncClient,
) -> None:
    doc = (await client.get("/schema/openapi.json")).json()
    created = doc["paths"]["/api/v1/workflows"]["post"]["responses"]["201"]
    assert "Location" in created["headers"]
    r = await client.post("/api/v1/workflows", json={"name": "Located"})
    assert r.status_code == 201
    assert r.headers["location"] == f"http://testserver.local/api/v1/workflows/{r.json()['id']}"
    assert (await client.get(r.headers["location"])).json() == r.json()
    wf = r.json()["id"]
    d = {
        "nodes": [
            {
                "id": "start",
                "type": "trigger.manual",
                "label": "start",
                "position": {"x": 0, "y": 0},
                "config": {},
            }
        ],
        "edges": [],
    }
    assert (await client.put(f"/api/v1/workflows/{wf}/draft", json={"diagram": d})).is_success
    r = await client.post(f"/api/v1/workflows/{wf}/publish")
    assert r.headers["location"].endswith(f"/api/v1/workflows/{wf}/versions/1")
    assert (await client.get(r.headers["location"])).status_code == 200
    r = await client.post(f"/api/v1/workflows/{wf}/runs", json={"input": {}})
    assert r.status_code == 201 and r.headers["location"] == r.json()["status_url"]
    r = await client.post(
        "/api/v1/credentials", json={"name": "k", "type": "bearer", "data": {"token": "t"}}
    )
    assert (await client.get(r.headers["location"])).json()["id"] == r.json()["id"]
    r = await client.post("/api/v1/tokens", json={"name": "located"})
    assert r.headers["location"].endswith(f"/api/v1/tokens/{r.json()['id']}")


async def test_malformed_ids_are_400s_naming_the_parameter(client: httpx.AsyncClient) -> None:
    schema = await problem_schema(client)
    wf = (await client.post("/api/v1/workflows", json={"name": "Ids"})).json()["id"]
    for path, name in (
        ("/api/v1/runs/not-a-uuid", "run_id"),
        ("/api/v1/workflows/12345", "workflow_id"),
        (f"/api/v1/workflows/{wf}/versions/first", "number"),
        ("/api/runs/not-a-uuid", "run_id"),  # the unversioned alias too
    ):
        body = check_problem(await client.get(path), schema, 400)
        assert body["errors"] == [{"detail": body["detail"], "parameter": name}], body
    # a well-formed id of nothing is still a 404
    check_problem(await client.get(f"/api/v1/runs/{uuid.uuid4()}"), schema, 404)
