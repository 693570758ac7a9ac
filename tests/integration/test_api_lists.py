"""The API's list and naming conventions (docs/api.md, "Lists" and "Answers"), walked over
every route of the router as the authorization matrix walks it:

- every collection answers the one list envelope (``data``, ``has_more``, ``next_cursor``,
  ``next`` and a ``Link: <next>; rel="next"`` header) and pages: with at least three items
  made, pages of two followed through ``next`` give the whole list once, in its order;
- every route (every method) refuses an unknown query parameter with a 400 naming it;
- every timestamp in the answers of every collection, of every other ``GET`` route (each
  read with a sample resource) and of the created objects is RFC 3339 UTC ending in
  ``Z`` (times kept as JSON too: pins, audit details and snapshots, also those stored
  ending ``+00:00`` before); every ``url`` member is absolute; the object's own id is
  ``id``; a version number is named ``version`` (or ``active_version``), never ``number``
  or ``version_number``.

A new collection route missing from :data:`COLLECTIONS` fails
:func:`test_every_collection_is_walked`; a new ``GET`` route neither a collection nor in
:data:`SINGLE` (nor :data:`NOT_JSON`) fails :func:`test_every_get_route_is_walked`.
"""

from __future__ import annotations

import re
import typing
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute

from backend.api.lists import ListPage
from backend.api.versioning import PREFIX
from backend.app import create_app
from backend.db.models import Workflow
from backend.runtime import Runtime
from backend.services import audit
from backend.services.subscriptions.producing import DeliveryProducer
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import login, wait_for_run
from tests.integration.flows import stored_file
from tests.integration.rbac import PASSWORD, make_user

pytestmark = pytest.mark.integration

BASE = "http://testserver.local"

DOCUMENT = """
openapi: 3.0.3
info: {title: Lists API %d, version: "1"}
servers: [{url: "https://lists.example"}]
paths:
  /ping:
    get:
      operationId: ping
      responses: {"200": {description: ok}}
"""

# Each collection route (path template) -> the query its walk sends (besides limit/cursor).
COLLECTIONS: dict[str, dict[str, str]] = {
    "/api/v1/workflows": {},
    "/api/v1/workflows/{workflow_id:uuid}/versions": {},
    "/api/v1/workflows/{workflow_id:uuid}/grants": {},
    "/api/v1/workflows/{workflow_id:uuid}/grants/subjects": {},
    "/api/v1/workflows/{workflow_id:uuid}/webhook/deliveries": {},
    "/api/v1/runs": {},
    "/api/v1/runs/{run_id:uuid}/children": {},
    "/api/v1/search": {"in": "workflows", "q": "Listed"},
    "/api/v1/credentials": {},
    "/api/v1/credentials/types": {},
    "/api/v1/credentials/{credential_id:uuid}/grants": {},
    "/api/v1/tokens": {},
    "/api/v1/auth/sessions": {},
    "/api/v1/admin/users": {},
    "/api/v1/admin/sessions": {},
    "/api/v1/admin/audit": {},
    "/api/v1/admin/settings": {},
    "/api/v1/admin/tokens": {},
    "/api/v1/admin/service-accounts": {},
    "/api/v1/admin/groups": {},
    "/api/v1/admin/projects": {},
    "/api/v1/admin/projects/{project_id:uuid}/grants": {},
    "/api/v1/admin/connectors": {},
    "/api/v1/workflows/{workflow_id:uuid}/subscriptions": {},
    "/api/v1/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}/deliveries": {},
    "/api/v1/admin/subscriptions": {},
    "/api/v1/admin/subscriptions/{subscription_id:uuid}/deliveries": {},
}

NOT_COLLECTIONS = {
    # a map keyed by node id (the designer's pinned data), not a list of resources
    "/api/v1/workflows/{workflow_id:uuid}/pins",
    # the node-type catalogue: one document (groups, node types, icons) read whole
    "/api/v1/catalog",
}

# Each other GET route -> the query its walk sends, and the member its answer names the
# resource by (None: the answer is a document about it, not the resource itself).
SINGLE: dict[str, tuple[dict[str, str], str | None]] = {
    "/api/v1/auth/me": ({}, "id"),
    "/api/v1/admin/users/{user_id:uuid}": ({}, "id"),
    "/api/v1/workflows/{workflow_id:uuid}": ({}, "id"),
    "/api/v1/workflows/{workflow_id:uuid}/versions/{number:int}": ({}, "version"),
    "/api/v1/workflows/{workflow_id:uuid}/diff": ({"from": "1", "to": "draft"}, None),
    "/api/v1/workflows/{workflow_id:uuid}/export": ({"version": "1"}, None),
    "/api/v1/workflows/{workflow_id:uuid}/webhook": ({}, None),
    "/api/v1/workflows/{workflow_id:uuid}/webhook/test-call": ({}, None),
    "/api/v1/workflows/{workflow_id:uuid}/trigger-sample": ({}, None),
    "/api/v1/workflows/{workflow_id:uuid}/pins": ({}, None),
    "/api/v1/runs/{run_id:uuid}": ({}, "id"),
    "/api/v1/credentials/{credential_id:str}": ({}, "id"),
    "/api/v1/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}": ({}, "id"),
    "/api/v1/admin/subscriptions/{subscription_id:uuid}": ({}, "id"),
    "/api/v1/admin/connectors/{connector_name:str}": ({}, "name"),
    "/api/v1/catalog": ({}, None),
}

NOT_JSON = {
    # the caller's own bytes or data, downloaded whole: no resource of the API
    "/api/v1/files/{file_id:uuid}",
    "/api/v1/runs/{run_id:uuid}/values/{digest:str}",
    # redirects to an OAuth2 provider and back (no answer body of the API)
    "/api/v1/credentials/{credential_id:str}/connect",
    "/api/v1/credentials/oauth2/callback",
    # JSON Lines: read line by line in test_single_objects_name_their_id_and_times_alike
    "/api/v1/admin/audit/export.jsonl",
    # Server-Sent Events, each update the run as GET /api/v1/runs/{id} answers it
    # (tests/integration/test_run_event_stream.py compares them)
    "/api/v1/runs/{run_id:uuid}/events",
}

OLD_VERSION_NAMES = {"number", "version_number"}
NAMES_FREE = {"/api/v1/catalog"}
"""Answers whose member names are not the API's: the catalogue's node types describe the
services' own data (a GitHub issue's ``number``)."""

ENVELOPE = {"data", "has_more", "next_cursor", "next"}
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def _api_routes(app: Litestar) -> list[tuple[str, str, Any]]:
    return [
        (method, route.path, handler)
        for route in app.routes
        if isinstance(route, HTTPRoute) and route.path.startswith("/api/")
        for method, (handler, _) in route.route_handler_map.items()
        if method not in ("OPTIONS", "HEAD")
    ]


def _returns_list(handler: Any) -> bool:
    annotation = typing.get_type_hints(handler.fn).get("return")
    return typing.get_origin(annotation) in (list, dict) or (
        isinstance(annotation, type) and issubclass(annotation, ListPage)
    )


def test_every_collection_is_walked(settings: Settings) -> None:
    app = create_app(settings)
    found = {path for method, path, h in _api_routes(app) if method == "GET" and _returns_list(h)}
    assert found - NOT_COLLECTIONS == set(COLLECTIONS)
    bare = [
        path
        for method, path, h in _api_routes(app)
        if typing.get_origin(typing.get_type_hints(h.fn).get("return")) is list
    ]
    assert bare == [], "collections answer the list envelope, never a bare array"


def test_every_get_route_is_walked(settings: Settings) -> None:
    app = create_app(settings)
    found = {path for method, path, _ in _api_routes(app) if method == "GET"}
    walked = set(COLLECTIONS) | NOT_COLLECTIONS | set(SINGLE) | NOT_JSON
    assert found == walked, (sorted(found - walked), sorted(walked - found))


@dataclass
class World:
    params: dict[str, str]
    client: httpx.AsyncClient
    created: list[tuple[str, dict[str, Any]]]


async def _three_of_everything(
    stack: AsyncExitStack, settings: Settings, runtime: Runtime, admin: httpx.AsyncClient
) -> World:
    """At least three items in every collection; the path parameters to reach them and
    every creation's answer."""
    created: list[tuple[str, dict[str, Any]]] = []

    async def made(path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = await admin.post(f"{PREFIX}{path}", json=body)
        assert r.status_code == 201, (path, r.text)
        created.append((path, dict(r.json())))
        return dict(r.json())

    child = await made("/workflows", {"name": "Listed child"})
    d = diagram(
        [node("start", "trigger.manual"), node("s", "control.set", mapping={"n": "=item"})],
        [edge("start", "s")],
    )
    await admin.put(f"{PREFIX}/workflows/{child['id']}/draft", json={"diagram": d})
    await made(f"/workflows/{child['id']}/publish", {})
    wf = await made("/workflows", {"name": "Listed parent"})
    await made("/workflows", {"name": "Listed third"})
    subscriptions = [  # each gets the three publishes below as deliveries
        await made(
            f"/workflows/{wf['id']}/subscriptions",
            {"url": f"http://127.0.0.1:9/s{n}", "events": ["workflow.published"]},
        )
        for n in range(3)
    ]
    for n in range(3):  # three versions (each draft differs from the last)
        loop = diagram(
            [
                node("hook", "trigger.webhook"),
                node("loop", "control.foreach", items="=body.items", workflow_id=child["id"]),
                node("done", "control.set", mapping={"n": n}),
            ],
            [edge("hook", "loop"), edge("loop", "done")],
        )
        saved = await admin.put(f"{PREFIX}/workflows/{wf['id']}/draft", json={"diagram": loop})
        assert saved.status_code == 200, saved.text
        await made(f"/workflows/{wf['id']}/publish", {"note": f"v{n}"})
    await DeliveryProducer(runtime.sessionmaker, settings.base_url).index_once()
    run = await made(f"/workflows/{wf['id']}/runs", {"input": {"body": {"items": [1, 2, 3]}}})
    assert await wait_for_run(runtime, run["id"], timeout=60) == "succeeded"
    hook = (await admin.get(f"{PREFIX}/workflows/{wf['id']}")).json()["webhook_url"]
    for n in range(3):
        r = await admin.post(hook.removeprefix(BASE), json={"items": [n]})
        assert r.is_success, r.text
    cred = None
    for n in range(3):
        cred = await made(
            "/credentials", {"name": f"c{n}", "type": "bearer", "data": {"token": "t"}}
        )
        await made("/tokens", {"name": f"t{n}", "expires_in_days": 30})
        await made("/admin/service-accounts", {"name": f"sa{n}"})
        await made("/admin/groups", {"name": f"g{n}"})
        await made("/admin/connectors", {"name": f"lists_{n}", "document": DOCUMENT % n})
    assert cred is not None
    project = await made("/admin/projects", {"name": "p0"})
    await made("/admin/projects", {"name": "p1"})
    await made("/admin/projects", {"name": "p2"})
    user = None
    for n in range(3):
        user = await make_user(runtime, f"lister{n}@example.com", "editor")
        subject = {"subject": f"user:{user}", "level": "read"}
        await made(f"/workflows/{wf['id']}/grants", subject)
        await made(f"/admin/projects/{project['id']}/grants", subject)
        await made(f"/credentials/{cred['id']}/grants", {**subject, "level": "use"})
        # three more sessions of the admin (own sessions) besides the users' own
        other = await stack.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_app(settings, runtime)), base_url=BASE
            )
        )
        await login(other, f"lister{n}@example.com", PASSWORD)
        again = await stack.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_app(settings, runtime)), base_url=BASE
            )
        )
        await login(again)
    pinned = await admin.put(f"{PREFIX}/workflows/{wf['id']}/pins/done", json={"data": {"n": 1}})
    assert pinned.status_code == 200, pinned.text
    await _stored_the_old_way(runtime, uuid.UUID(wf["id"]))
    file_id = await stored_file(runtime, wf["id"])
    params = {
        "user_id": str(user),
        "number": "1",
        "connector_name": "lists_0",
        "file_id": file_id,
        "workflow_id": wf["id"],
        "run_id": run["id"],
        "credential_id": cred["id"],
        "project_id": project["id"],
        "subscription_id": subscriptions[0]["id"],
    }
    return World(params, admin, created)


async def _stored_the_old_way(runtime: Runtime, workflow_id: uuid.UUID) -> None:
    """A pin and an audit row whose times end ``+00:00``, as ``isoformat()`` wrote them
    before they were written ending ``Z``: the API answers them ending ``Z``."""
    old = "2026-11-30T09:15:00.250000+00:00"
    async with runtime.sessionmaker() as session, session.begin():
        wf = await session.get(Workflow, workflow_id)
        assert wf is not None
        stored = {"data": {"n": 2}, "pinned_at": old, "pinned_by": None}
        wf.pinned_data = {**(wf.pinned_data or {}), "loop": stored}
        await audit.record(
            session,
            "workflow.pin",
            "workflow",
            workflow_id,
            after=stored,
            details={"node_id": "loop", "until": old},
        )


@pytest.fixture
async def world(
    settings: Settings, runtime: Runtime, client: httpx.AsyncClient, worker: Any
) -> AsyncIterator[World]:
    async with AsyncExitStack() as stack:
        yield await _three_of_everything(stack, settings, runtime, client)


def _fill(path: str, params: dict[str, str]) -> str:
    return re.sub(r"\{(\w+):\w+\}", lambda m: params.get(m.group(1), str(uuid.uuid4())), path)


def _timestamps(value: Any, where: str = "") -> list[tuple[str, str]]:
    """Every ``(place, text)`` in ``value`` that is an RFC 3339 timestamp."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            found += _timestamps(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _timestamps(v, f"{where}[{i}]")
    elif isinstance(value, str) and _TIMESTAMP.match(value):
        found.append((where, value))
    return found


def _urls(value: Any, where: str = "") -> list[tuple[str, str]]:
    """Every ``(place, text)`` of a member named ``url`` or ``*_url`` in ``value``."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str) and (k == "url" or k.endswith("_url")):
                found.append((f"{where}.{k}", v))
            found += _urls(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _urls(v, f"{where}[{i}]")
    return found


def _key(item: Any) -> Any:
    return item.get("id") or item.get("name") or item.get("key") or repr(sorted(item.items()))


async def test_every_collection_answers_the_envelope_and_pages(world: World) -> None:
    c = world.client
    answers: list[tuple[str, Any]] = []
    for template, query in COLLECTIONS.items():
        path = _fill(template, world.params)
        whole = await c.get(path, params={**query, "limit": 100})
        assert whole.status_code == 200, (path, whole.text)
        body = whole.json()
        assert ENVELOPE <= set(body), (path, body)
        assert body["has_more"] is False and body["next"] is None, path
        assert len(body["data"]) >= 3, (path, body["data"])
        answers.append((path, body))
        walked: list[Any] = []
        r = await c.get(path, params={**query, "limit": 2})
        for _ in range(100):
            assert r.status_code == 200, (path, r.text)
            page = r.json()
            assert len(page["data"]) <= 2, path
            walked += page["data"]
            if not page["has_more"]:
                assert page["next"] is None and page["next_cursor"] is None
                assert 'rel="next"' not in r.headers.get("link", ""), path
                break
            assert page["next"].startswith(BASE + PREFIX), (path, page["next"])
            assert f"cursor={page['next_cursor']}" in page["next"]
            assert r.headers["link"] == f'<{page["next"]}>; rel="next"', path
            r = await c.get(page["next"])
        assert [_key(i) for i in walked] == [_key(i) for i in body["data"]], path
        bad = await c.get(path, params={**query, "limit": 0})
        assert bad.status_code == 400, (path, bad.text)
        assert bad.json()["errors"][0].get("parameter") == "limit", (path, bad.text)
        bad = await c.get(path, params={**query, "cursor": "not-a-cursor"})
        assert bad.status_code == 400, (path, bad.text)
        assert bad.json()["errors"][0].get("parameter") == "cursor", (path, bad.text)

    wrong = [
        (path, place, text)
        for path, body in answers
        for place, text in _timestamps(body)
        if not text.endswith("Z")
    ]
    assert wrong == [], "timestamps are RFC 3339 UTC ending in Z"
    relative = [
        (path, place, text)
        for path, body in answers
        for place, text in _urls(body)
        if text and not text.startswith(("http://", "https://"))
    ]
    assert relative == [], "urls are absolute"


def _old_version_names(value: Any, where: str = "") -> list[str]:
    """Every place in ``value`` of a member named as versions were before ``v1``."""
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in OLD_VERSION_NAMES:
                found.append(f"{where}.{k}")
            found += _old_version_names(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _old_version_names(v, f"{where}[{i}]")
    return found


def _convention_faults(where: str, body: Any, names: bool = True) -> list[tuple[str, str, str]]:
    """``(where, place, what)`` of each timestamp not ending in ``Z``, relative url and
    (``names``) version named the old way in ``body``."""
    old = _old_version_names(body) if names else []
    return (
        [(where, p, t) for p, t in _timestamps(body) if not t.endswith("Z")]
        + [(where, p, u) for p, u in _urls(body) if u and not u.startswith(("http://", "https://"))]
        + [(where, p, "old version name") for p in old]
    )


async def test_single_objects_name_their_id_and_times_alike(world: World) -> None:
    c = world.client
    wf = world.params["workflow_id"]
    faults = []
    for template, (query, own) in SINGLE.items():
        path = _fill(template, world.params)
        r = await c.get(path, params=query)
        assert r.status_code == 200, (path, r.text)
        body = r.json()
        if own is not None:
            assert own in body, (path, sorted(body))
        faults += _convention_faults(path, body, names=template not in NAMES_FREE)
    for path, body in world.created:
        faults += _convention_faults(f"POST {path}", body)
    exported = await c.get(f"{PREFIX}/admin/audit/export.jsonl")
    assert exported.status_code == 200, exported.text
    entries = [msgspec.json.decode(line) for line in exported.text.splitlines() if line]
    assert len(entries) >= 3
    for entry in entries:
        assert "id" in entry, entry
        faults += _convention_faults("audit entry", entry)
    assert faults == [], "times end in Z, urls are absolute, versions are named version"
    started = await c.post(f"{PREFIX}/workflows/{wf}/runs", json={"input": {"body": {"items": []}}})
    assert started.status_code == 201
    assert started.json()["id"] and "run_id" not in started.json()
    assert started.headers["location"] == started.json()["status_url"]


async def test_unversioned_aliases_keep_the_old_version_names(world: World) -> None:
    c = world.client
    wf = world.params["workflow_id"]
    run = await c.get(f"/api/runs/{world.params['run_id']}")
    assert run.json()["version_number"] == 3 and "version" not in run.json()
    runs = await c.get("/api/runs", params={"workflow_id": wf})
    assert len(runs.json()) >= 4
    assert [r["version_number"] for r in runs.json()] == [3] * len(runs.json())
    version = await c.get(f"/api/workflows/{wf}/versions/2")
    assert version.json()["number"] == 2 and "version" not in version.json()
    listed = await c.get(f"/api/workflows/{wf}/versions")
    assert [v["number"] for v in listed.json()] == [3, 2, 1]
    v1 = await c.get(f"{PREFIX}/workflows/{wf}/versions")
    assert [v["version"] for v in v1.json()["data"]] == [3, 2, 1]
    assert (await c.get(f"{PREFIX}/runs/{world.params['run_id']}")).json()["version"] == 3
    fourth = diagram(
        [node("start", "trigger.manual"), node("s", "control.set", mapping={"n": 4})],
        [edge("start", "s")],
    )
    saved = await c.put(f"{PREFIX}/workflows/{wf}/draft", json={"diagram": fourth})
    assert saved.status_code == 200, saved.text
    old = await c.post(f"/api/workflows/{wf}/publish", json={})
    assert old.status_code == 201, old.text
    assert old.json()["version"]["number"] == 4 and "version" not in old.json()["version"]
    assert old.headers["location"].endswith(f"/api/v1/workflows/{wf}/versions/4")


async def test_every_route_refuses_an_unknown_query_parameter(world: World) -> None:
    app = create_app(Settings())
    refused = []
    for method, template, handler in _api_routes(app):
        if handler.operation_id == "oauth2_callback":
            continue  # the OAuth2 provider appends what it likes (docs/api.md, "Requests")
        path = _fill(template, {**world.params, "node_id": "x", "digest": "x"})
        r = await world.client.request(method, path, params={"zz_unknown": "1"})
        body = r.json() if r.headers.get("content-type", "").endswith("json") else {}
        named = [e.get("parameter") for e in body.get("errors", [])]
        if r.status_code != 400 or named != ["zz_unknown"]:
            refused.append((method, template, r.status_code))
    assert refused == []
