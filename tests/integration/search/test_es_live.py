"""Search on a real Elasticsearch: runs only when ES_URL is set (no server can be installed
on the test machines; the request formats are unit-tested, the indexer runs against an
emulator of the bulk API). Uses its own index prefix and deletes its indexes afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backend.runtime import Runtime
from backend.search.criteria import build_criteria
from backend.search.elastic import ElasticSearch, make_client
from backend.search.es_documents import KINDS, index_name
from backend.search.model import Visibility
from tests.integration.search.data import make_run, make_workflow

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("ES_URL"), reason="ES_URL is not set"),
]


@pytest.fixture
async def live(runtime: Runtime) -> AsyncIterator[ElasticSearch]:
    prefix = f"ry-test-{uuid.uuid4().hex[:8]}"
    backend = ElasticSearch(make_client(os.environ["ES_URL"]), runtime.sessionmaker, prefix)
    try:
        yield backend
    finally:
        for kind in KINDS:
            await backend.client.indices.delete(
                index=index_name(prefix, kind), ignore_unavailable=True
            )
        await backend.client.indices.delete_index_template(name=f"{prefix}-*")
        await backend.close()


async def test_es_live_search_filters_facets_pages(runtime: Runtime, live: ElasticSearch) -> None:
    orders = await make_workflow(runtime, "Order intake", tags=["billing"])
    other = await make_workflow(runtime, "Mail digest")
    failed = await make_run(
        runtime,
        orders,
        status="failed",
        input={"c": "cust-9000"},
        error={"message": "HTTP 504 gateway timeout"},
        minutes=2,
    )
    ok = await make_run(runtime, orders, input={"c": "cust-4711"}, minutes=1)
    await make_run(runtime, other, input={"c": "cust-4711"}, minutes=3)
    await live.reindex()
    everyone = Visibility(None, True)

    async def ids(q: str, visible: Visibility = everyone, **kw: Any) -> list[str]:
        result = await live.search(build_criteria(q), visible, query=q, **kw)
        return [h.id for h in result.hits]

    example = 'status:failed workflow:"Order intake" tag:billing "gateway timeout"'
    assert await ids(example) == [str(failed)]
    assert set(await ids("cust-4711 tag:billing")) == {str(ok)}
    assert await ids("cust-4711", Visibility(frozenset({str(other)}), False)) != []
    assert await ids("cust-9000", Visibility(frozenset({str(other)}), False)) == []
    first = await live.search(build_criteria(""), everyone, query="", limit=2)
    assert first.total == 3 and first.next_cursor
    rest = await live.search(
        build_criteria(""), everyone, query="", limit=2, cursor=first.next_cursor
    )
    assert len(rest.hits) == 1 and rest.next_cursor is None
    status = next(f for f in first.facets if f.field == "status")
    assert {(v.value, v.count) for v in status.values} == {("failed", 1), ("succeeded", 2)}
