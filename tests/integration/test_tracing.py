"""A trace of one run, exported to an in-process collector: the API request, the run's
start, the worker's jobs, the step and the connector's HTTP call are linked in one trace
(the context crosses to the worker inside the arq job, through Redis)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from backend.observability import tracing
from backend.runtime import Runtime
from tests.diagrams import order_pipeline
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    collected = InMemorySpanExporter()
    tracing.configure(exporter=collected)
    yield collected
    tracing.shutdown()


@pytest.fixture
def sink() -> Iterator[HttpSink]:
    s = HttpSink().start()
    yield s
    s.stop()


async def test_one_run_is_one_trace_from_api_request_to_http_call(
    exporter: InMemorySpanExporter,
    client: httpx.AsyncClient,
    runtime: Runtime,
    worker_factory: Any,
    sink: HttpSink,
) -> None:
    wf = await publish(client, order_pipeline(sink.url + "/orders"))
    async with worker_factory():  # built after tracing is on: its HTTP calls are traced
        exporter.clear()
        r = await client.post(wf["webhook_path"], json={"name": "Ada", "qty": 3, "price": 50})
        assert r.status_code == 202
        assert await wait_for_run(runtime, r.json()["run_id"]) == "succeeded"
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}

    (api,) = [s for s in spans if s.name == "POST /hooks/{token}"]
    assert api.kind is SpanKind.SERVER and api.parent is None
    (start,) = [s for s in spans if s.name == "run.start"]
    assert start.parent.span_id == api.context.span_id
    assert start.attributes["railyard.run_id"] == r.json()["run_id"]
    (call,) = [s for s in spans if s.name == "HTTP POST"]
    assert call.kind is SpanKind.CLIENT
    assert call.attributes["url.full"] == sink.url + "/orders"
    assert call.attributes["http.response.status_code"] == 200
    # the remote side saw the same trace
    assert sink.requests[0].headers["traceparent"].split("-")[1] == format(
        api.context.trace_id, "032x"
    )

    chain = [call]  # walk up from the HTTP call to the API request
    while chain[-1].parent is not None:
        chain.append(by_id[chain[-1].parent.span_id])
    names = [s.name for s in chain]
    assert names[1] == "step http_1" and names[-1] == "POST /hooks/{token}"
    assert any(s.kind is SpanKind.CONSUMER and s.name.startswith("job ") for s in chain)
    assert "run.start" in names
    assert {s.context.trace_id for s in chain} == {api.context.trace_id}
    step = chain[1]
    assert step.attributes["railyard.node_type"] == "http.request"
    assert step.attributes["railyard.outcome"] == "succeeded"


async def test_tracing_off_sends_no_trace_context(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    assert not tracing.enabled()
    wf = await publish(client, order_pipeline(sink.url + "/orders"))
    r = await client.post(wf["webhook_path"], json={"name": "Ada", "qty": 3, "price": 50})
    assert await wait_for_run(runtime, r.json()["run_id"]) == "succeeded"
    assert "traceparent" not in sink.requests[0].headers
