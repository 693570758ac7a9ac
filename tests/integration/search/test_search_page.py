"""The results page: the header's search box, tabs, facets that narrow the query, the
parser's error with a caret, and the run page's link back to the results."""

from __future__ import annotations

import uuid

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, node
from tests.integration.search.data import make_run, make_workflow

pytestmark = pytest.mark.integration


async def test_search_page_lists_hits_with_facets_and_links_back(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    made = (await client.post("/api/workflows", json={"name": "Order intake"})).json()
    d = diagram([node("webhook", "trigger.webhook")], [])
    await client.put(f"/api/workflows/{made['id']}/draft", json={"diagram": d})
    assert (await client.post(f"/api/workflows/{made['id']}/publish")).status_code == 201
    wf = uuid.UUID(made["id"])
    failed = await make_run(runtime, wf, status="failed", input={"order": "A-77 rush"})
    await make_run(runtime, wf, input={"order": "B-12"})
    page = await client.get("/workflows")
    assert 'action="/search"' in page.text and 'id="global-search-q"' in page.text
    r = await client.get("/search", params={"q": "A-77"})
    assert r.status_code == 200
    assert f'data-id="{failed}"' in r.text
    assert f'href="/runs/{failed}?search=A-77"' in r.text
    assert 'id="search-total">1 result<' in r.text
    # the status facet narrows the query
    r = await client.get("/search", params={"q": ""})
    assert 'href="/search?q=status%3Afailed&amp;in=runs"' in r.text
    assert ">Audit log<" in r.text  # an admin has the audit tab
    detail = await client.get(f"/runs/{failed}", params={"search": "A-77 status:failed"})
    assert 'id="back-to-results"' in detail.text
    assert 'href="/search?q=A-77+status%3Afailed"' in detail.text


async def test_search_page_shows_the_parsers_error(client: httpx.AsyncClient) -> None:
    r = await client.get("/search", params={"q": 'status:failed "timeout'})
    assert r.status_code == 400
    assert "unterminated quote" in r.text
    # the caret sits under the opening quote (character 14)
    assert "status:failed &#34;timeout\n" + " " * 14 + "^</pre>" in r.text


async def test_search_page_workflow_tab(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = await make_workflow(runtime, "Slack alerts", tags=["ops"])
    r = await client.get("/search", params={"q": "alerts", "in": "workflows"})
    assert r.status_code == 200
    assert f'href="/workflows/{wf}/designer"' in r.text
    assert 'class="search-tab active" data-scope="workflows"' in r.text
