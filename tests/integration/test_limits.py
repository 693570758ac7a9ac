"""Size limits (docs/operations.md, "Limits"): each is refused with a 4xx naming the limit,
stores nothing, and is configurable."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from backend.app import create_app
from backend.runtime import Runtime
from backend.services.identity import accounts
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, login

pytestmark = pytest.mark.integration

SMALL = {
    "max_diagram_nodes": 5,
    "max_diagram_edges": 4,
    "max_config_depth": 4,
    "max_config_bytes": 200,
    "max_json_depth": 6,
}


@pytest_asyncio.fixture
async def small(settings: Settings, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """A logged-in client of an app whose limits are small."""
    async with runtime.sessionmaker() as session, session.begin():
        await accounts.create_user(session, ADMIN_EMAIL, ADMIN_PASSWORD, role="admin")
    tight = Settings(**{**{f: getattr(settings, f) for f in settings.__struct_fields__}, **SMALL})
    runtime.settings = tight
    transport = httpx.ASGITransport(app=create_app(tight, runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
        await login(c)
        yield c


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


async def workflow(c: httpx.AsyncClient) -> dict[str, Any]:
    r = await c.post("/api/workflows", json={"name": "limits"})
    assert r.status_code == 201, r.text
    return dict(r.json())


async def refused(r: httpx.Response, limit: str, field: str) -> None:
    assert r.status_code == 400, r.text
    body = r.json()
    assert limit in body["detail"], body
    assert body["field"] == field, body


def chain(n: int) -> dict[str, Any]:
    nodes = [node("hook", "trigger.webhook")] + [
        node(f"s{i}", "control.set", mapping={}) for i in range(n - 1)
    ]
    ids = [x["id"] for x in nodes]
    return diagram(nodes, [edge(a, b) for a, b in itertools.pairwise(ids)])


async def test_diagram_node_and_edge_counts_are_limited(small: httpx.AsyncClient) -> None:
    wf = await workflow(small)
    ok = await small.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": chain(5)})
    assert ok.status_code == 200, ok.text
    for path in ("draft", "compile"):
        method = small.put if path == "draft" else small.post
        r = await method(f"/api/workflows/{wf['id']}/{path}", json={"diagram": chain(6)})
        await refused(r, "max_diagram_nodes", "nodes")
    edges = chain(5)
    edges["edges"].append(edge("s0", "s3"))
    r = await small.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": edges})
    await refused(r, "max_diagram_edges", "edges")
    stored = (await small.get(f"/api/workflows/{wf['id']}")).json()["draft"]
    assert len(stored["nodes"]) == 5, "a refused draft leaves the stored one as it was"


async def test_node_config_depth_and_size_are_limited(small: httpx.AsyncClient) -> None:
    wf = await workflow(small)
    url = f"/api/workflows/{wf['id']}/draft"

    def with_mapping(mapping: Any) -> dict[str, Any]:
        # config {"mapping": <mapping>} nests one level more than the mapping
        nodes = [node("hook", "trigger.webhook"), node("s", "control.set", mapping=mapping)]
        return diagram(nodes, [edge("hook", "s")])

    r = await small.put(url, json={"diagram": with_mapping(nested(4))})
    await refused(r, "max_config_depth", "nodes[1].config")
    assert (await small.put(url, json={"diagram": with_mapping(nested(3))})).is_success
    r = await small.put(url, json={"diagram": with_mapping({"x": "y" * 300})})
    await refused(r, "max_config_bytes", "nodes[1].config")
    # nested past what the decoder follows: refused before any field is reached
    deep = '{"a":' * 10_000 + "1" + "}" * 10_000
    body = '{"diagram": {"nodes": [{"id": "s", "type": "control.set", "config": ' + deep + "}]}}"
    r = await small.put(url, content=body, headers={"content-type": "application/json"})
    await refused(r, "max_config_depth", "body")


async def test_a_config_nested_10000_levels_is_a_400(client: httpx.AsyncClient) -> None:
    wf = (await client.post("/api/workflows", json={"name": "deep"})).json()
    body = '{"diagram": {"nodes": [{"id": "s", "type": "control.set", "config": '
    body += '{"a":' * 10_000 + "1" + "}" * 10_000 + "}]}}"
    r = await client.put(
        f"/api/workflows/{wf['id']}/draft",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400, r.text
    assert "nested" in r.json()["detail"]


async def publish_hook(c: httpx.AsyncClient) -> str:
    wf = await workflow(c)
    d = diagram([node("hook", "trigger.webhook")], [])
    assert (await c.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})).is_success
    r = await c.post(f"/api/workflows/{wf['id']}/publish")
    assert r.status_code == 201, r.text
    return str(r.json()["webhook_url"]).replace("http://testserver.local", "")


async def test_webhook_json_depth_is_limited(small: httpx.AsyncClient, runtime: Runtime) -> None:
    hook = await publish_hook(small)
    ok = await small.post(hook, json=nested(6))
    assert ok.status_code == 202, ok.text
    for depth in (7, 10_000):
        text = '{"a":' * depth + "1" + "}" * depth
        r = await small.post(hook, content=text, headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        assert "max_json_depth" in r.json()["detail"]
        assert r.json()["field"] == "body", r.json()
    async with runtime.engine.connect() as conn:
        from sqlalchemy import text as sql

        runs = (await conn.execute(sql("select count(*) from runs"))).scalar_one()
    assert runs == 1, "refused deliveries start no run"


async def test_run_input_depth_is_limited(small: httpx.AsyncClient) -> None:
    wf = await workflow(small)
    d = diagram([node("hook", "trigger.webhook")], [])
    await small.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    await small.post(f"/api/workflows/{wf['id']}/publish")
    r = await small.post(f"/api/workflows/{wf['id']}/runs", json={"input": nested(7)})
    await refused(r, "max_json_depth", "input")
    r = await small.post(f"/api/workflows/{wf['id']}/runs", json={"input": nested(6)})
    assert r.status_code == 201, r.text


async def test_too_long_expression_blocks_publishing_naming_the_limit(
    client: httpx.AsyncClient,
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "long"})).json()
    long = "=" + "+".join(["1"] * 6000)
    d = diagram(
        [node("hook", "trigger.webhook"), node("s", "control.set", mapping={"x": long})],
        [edge("hook", "s")],
    )
    saved = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    assert saved.status_code == 200
    assert any("over the limit of 10,000" in x["message"] for x in saved.json()["diagnostics"])
    r = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert r.status_code == 422
    assert "over the limit" in json.dumps(r.json()["diagnostics"])


def test_limits_are_settings_with_documented_defaults() -> None:
    from backend.settings import load_settings

    s = load_settings(environ={"RAILYARD_MAX_DIAGRAM_NODES": "7", "RAILYARD_MAX_JSON_DEPTH": "9"})
    assert s.max_diagram_nodes == 7 and s.max_json_depth == 9
    d = load_settings(environ={})
    assert (d.max_diagram_nodes, d.max_diagram_edges) == (5000, 10000)
    assert (d.max_config_depth, d.max_config_bytes, d.max_json_depth) == (32, 131072, 64)
