"""Property tests (hypothesis, bounded examples) over what strangers send: webhook bodies
and query strings, and diagrams saved, compiled and published through the API. Whatever
the input, the answer is 2xx or 4xx (never 5xx) and a refused request leaves no row."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish

EXAMPLES = settings(
    max_examples=40,
    derandomize=True,  # the same examples on every run: CI never flakes
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# any text, including what PostgreSQL cannot store (NUL, lone surrogates)
characters = st.characters(codec=None, categories=None) | st.sampled_from(
    ["\x00", "\ud800", "\udfff", "\u2028", "\ufeff", "\\", '"', "=", "$"]
)
texts = st.text(characters, max_size=12) | st.sampled_from(["\x00", "x\ud800", "\udfff\ud800"])
# what a URL can carry: any UTF-8-encodable text (a lone surrogate has no encoding)
url_texts = st.text(st.characters(codec="utf-8") | st.just("\x00"), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=16,
)
content_types = st.sampled_from(
    [
        "application/json",
        "application/vnd.api+json; charset=utf-16",
        "text/plain; charset=latin-1",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "multipart/form-data",
        "application/xml",
        "application/octet-stream",
        "",
    ]
)


async def counts(runtime: Runtime, *tables: str) -> dict[str, int]:
    async with runtime.engine.connect() as conn:
        return {
            t: int((await conn.execute(text(f"select count(*) from {t}"))).scalar_one())
            for t in tables
        }


RUN_TABLES = ("runs", "step_runs", "attempts", "files")


@st.composite
def webhook_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A POST to the webhook: a JSON document, or any bytes under any media type; any query."""
    query = draw(st.dictionaries(url_texts, url_texts, max_size=3))
    if draw(st.booleans()):
        body = json.dumps(draw(json_values)).encode()
        content_type = "application/json"
    else:
        body = draw(
            st.binary(max_size=64) | texts.map(lambda t: t.encode("utf-8", "surrogatepass"))
        )
        content_type = draw(content_types)
    return {"params": query, "content": body, "headers": {"content-type": content_type}}


@pytest_asyncio.fixture
async def hook_path(client: httpx.AsyncClient) -> str:
    """The webhook path of a published webhook -> Set workflow."""
    wf = await publish(
        client,
        diagram(
            [node("hook", "trigger.webhook"), node("set", "control.set", mapping={"b": "=body"})],
            [edge("hook", "set")],
        ),
    )
    return str(wf["webhook_path"])


@EXAMPLES
@given(request=webhook_requests())
async def test_any_webhook_request_answers_2xx_or_4xx_and_a_refusal_leaves_no_run(
    client: httpx.AsyncClient, runtime: Runtime, hook_path: str, request: dict[str, Any]
) -> None:
    before = await counts(runtime, *RUN_TABLES)
    r = await client.post(hook_path, **request)
    assert r.status_code < 500, (request, r.status_code, r.text)
    after = await counts(runtime, *RUN_TABLES)
    if r.status_code >= 400:
        assert after == before, (request, r.text)
    else:
        assert r.status_code == 202, r.text
        assert after["runs"] == before["runs"] + 1


node_types = st.sampled_from(
    ["trigger.webhook", "control.set", "control.if", "control.join", "http.request", "nope.x"]
)
node_ids = st.sampled_from(["a", "b", "c", ""]) | texts


@st.composite
def diagrams(draw: st.DrawFn) -> Any:
    """Mostly diagram-shaped documents with arbitrary parts; sometimes any JSON at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    nodes = [
        {
            "id": draw(node_ids),
            "type": draw(node_types),
            "label": draw(texts),
            "position": {"x": draw(st.floats(-1e6, 1e6)), "y": draw(st.integers(-9, 9))},
            "config": draw(st.dictionaries(texts, json_values, max_size=3)),
        }
        for _ in range(draw(st.integers(0, 4)))
    ]
    edges = [
        {
            "id": draw(texts),
            "source": draw(node_ids),
            "source_port": draw(st.sampled_from(["out", "true", "false", "error"]) | texts),
            "target": draw(node_ids),
            "target_port": "in",
        }
        for _ in range(draw(st.integers(0, 4)))
    ]
    document: dict[str, Any] = {"nodes": nodes, "edges": edges}
    if draw(st.booleans()):
        document["viewport"] = draw(json_values)
    return document


@pytest_asyncio.fixture
async def workflow_id(client: httpx.AsyncClient) -> str:
    r = await client.post("/api/workflows", json={"name": "Property"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


@EXAMPLES
@given(document=diagrams())
async def test_any_diagram_saves_compiles_and_publishes_or_is_refused_cleanly(
    client: httpx.AsyncClient, runtime: Runtime, workflow_id: str, document: Any
) -> None:
    url = f"/api/workflows/{workflow_id}"
    saved = (await client.get(url)).json()["draft"]
    before = await counts(runtime, "workflow_versions", "schedules")
    body = json.dumps({"diagram": document}).encode()
    headers = {"content-type": "application/json"}
    r = await client.put(f"{url}/draft", content=body, headers=headers)
    assert r.status_code < 500, (document, r.status_code, r.text)
    if r.status_code >= 400:  # refused: the stored draft is untouched
        assert (await client.get(url)).json()["draft"] == saved
    r = await client.post(f"{url}/compile", content=body, headers=headers)
    assert r.status_code < 500, (document, r.status_code, r.text)
    r = await client.post(f"{url}/publish")
    assert r.status_code < 500, (document, r.status_code, r.text)
    after = await counts(runtime, "workflow_versions", "schedules")
    if r.status_code != 201:
        assert after == before, (document, r.text)
