"""``/metrics`` scraped after real runs (webhook and API starts, a worker, a scheduler
fire): every documented series is there, with the samples the runs produced; who may
scrape; the worker's own ``/metrics`` on its probe port."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.app import create_app
from backend.observability import metrics
from backend.runtime import Runtime
from backend.settings import Settings
from backend.workers.health import ProbeServer
from tests.diagrams import order_pipeline
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish
from tests.integration.rbac import client_as

pytestmark = pytest.mark.integration

DOCUMENTED = {
    "railyard_runs_started": "counter",
    "railyard_runs_finished": "counter",
    "railyard_run_duration_seconds": "histogram",
    "railyard_step_duration_seconds": "histogram",
    "railyard_dispatch_latency_seconds": "histogram",
    "railyard_queue_depth": "gauge",
    "railyard_queue_oldest_age_seconds": "gauge",
    "railyard_ready_steps": "gauge",
    "railyard_workers": "gauge",
    "railyard_webhook_requests": "counter",
    "railyard_schedule_lag_seconds": "histogram",
    "railyard_http_request_duration_seconds": "histogram",
    "railyard_db_pool_connections": "gauge",
    "railyard_db_pool_size": "gauge",
    "railyard_retention_deleted": "counter",
}


@pytest.fixture
def sink() -> Iterator[HttpSink]:
    s = HttpSink().start()
    yield s
    s.stop()


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams: dict[str, Any], name: str, suffix: str = "", **labels: str) -> float:
    """The value of the sample ``name + suffix`` whose labels include ``labels``."""
    for s in fams[name].samples:
        if s.name == name + suffix and labels.items() <= s.labels.items():
            return float(s.value)
    seen = [s.labels for s in fams[name].samples if s.name == name + suffix]
    raise AssertionError(f"no {name}{suffix} sample with {labels}; seen {seen[:10]}")


async def test_metrics_lists_every_documented_series_with_the_runs_it_saw(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    wf = await publish(client, order_pipeline(sink.url + "/orders"))
    first = families((await client.get("/metrics")).text)
    started_before = (
        sample(first, "railyard_runs_started", "_total", workflow=wf["id"], trigger="webhook")
        if any(s.labels.get("workflow") == wf["id"] for s in first["railyard_runs_started"].samples)
        else 0.0
    )
    run_ids = []
    for qty in (3, 1):  # one through the HTTP step, one skipping it
        r = await client.post(wf["webhook_path"], json={"name": "Ada", "qty": qty, "price": 50})
        assert r.status_code == 202
        run_ids.append(r.json()["run_id"])
    for run_id in run_ids:
        assert await wait_for_run(runtime, run_id) == "succeeded"
    metrics.schedule_lag(0.2, catch_up=False)  # the scheduler's own process records these

    r = await client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    fams = families(r.text)
    for name, kind in DOCUMENTED.items():
        assert name in fams, f"{name} is not exposed"
        assert fams[name].type == kind, name
    w = wf["id"]
    assert sample(fams, "railyard_runs_started", "_total", workflow=w, trigger="webhook") == (
        started_before + 2
    )
    assert sample(fams, "railyard_runs_finished", "_total", workflow=w, status="succeeded") >= 2
    assert sample(fams, "railyard_run_duration_seconds", "_count", status="succeeded") >= 2
    assert sample(fams, "railyard_step_duration_seconds", "_count", status="succeeded") >= 1
    assert sample(fams, "railyard_dispatch_latency_seconds", "_count", job="execute_step") >= 1
    assert sample(fams, "railyard_webhook_requests", "_total", status="202") >= 2
    route = "/api/v1/workflows/{workflow_id}/publish"
    assert (
        sample(fams, "railyard_http_request_duration_seconds", "_count", route=route, status="201")
        >= 1
    )
    assert sample(fams, "railyard_schedule_lag_seconds", "_count", catch_up="false") >= 1
    assert sample(fams, "railyard_workers") >= 1  # the worker fixture's heartbeat
    assert sample(fams, "railyard_queue_depth") == 0  # everything ran
    assert sample(fams, "railyard_ready_steps") == 0
    assert sample(fams, "railyard_db_pool_size") > 0
    assert sample(fams, "railyard_db_pool_connections", state="checked_out") >= 0


async def test_metrics_needs_an_admin_or_the_metrics_token(
    settings: Settings, runtime: Runtime, client: httpx.AsyncClient
) -> None:
    transport = httpx.ASGITransport(app=create_app(settings, runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
        assert (await c.get("/metrics")).status_code == 401
        assert (await c.get("/metrics", headers={"Authorization": "Bearer x"})).status_code == 401
    async with client_as(settings, runtime, "ed@example.com", "editor") as editor:
        assert (await editor.get("/metrics")).status_code == 403
    runtime.settings = msgspec.structs.replace(settings, metrics_token="scrape-secret-1234")
    transport = httpx.ASGITransport(app=create_app(runtime.settings, runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
        ok = await c.get("/metrics", headers={"Authorization": "Bearer scrape-secret-1234"})
        assert ok.status_code == 200 and "railyard_runs_started" in ok.text
        wrong = await c.get("/metrics", headers={"Authorization": "Bearer scrape-secret-9999"})
        assert wrong.status_code == 401


async def test_worker_probe_port_serves_its_metrics_behind_the_token() -> None:
    async def ready() -> dict[str, str]:
        return {"database": "ok", "redis": "ok"}

    metrics.dispatch_latency("execute_step", 0.01)
    server = ProbeServer(ready, host="127.0.0.1", port=0, metrics_token="probe-token-5678")
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as c:
            assert (await c.get("/metrics")).status_code == 401
            r = await c.get("/metrics", headers={"Authorization": "Bearer probe-token-5678"})
            assert (await c.get("/health/live")).status_code == 200
    finally:
        await server.close()
    assert r.status_code == 200
    fams = families(r.text)
    assert sample(fams, "railyard_dispatch_latency_seconds", "_count", job="execute_step") >= 1
    assert "railyard_queue_depth" not in fams  # installation gauges: the API's only


def total(fams: dict[str, Any], name: str, suffix: str = "", **labels: str) -> float:
    """The sum of the samples ``name + suffix`` whose labels include ``labels`` (0 if none)."""
    return sum(
        float(s.value)
        for s in fams[name].samples
        if s.name == name + suffix and labels.items() <= s.labels.items()
    )


async def test_metrics_count_the_status_a_refused_request_got(
    client: httpx.AsyncClient, runtime: Runtime, sink: HttpSink
) -> None:
    """A request refused before it reaches its handler (a NUL in the body: 400 from the
    input check) is counted with the 400 the client got, not as a 500."""
    wf = await publish(client, order_pipeline(sink.url))
    refused = {"content": b'{"name": "a\\u0000b"}', "headers": {"content-type": "application/json"}}
    series = (
        ("railyard_webhook_requests", "_total"),
        ("railyard_http_request_duration_seconds", "_count"),
    )
    before = families((await client.get("/metrics")).text)
    r = await client.post(wf["webhook_path"], **refused)
    assert r.status_code == 400, r.text
    r = await client.post("/api/workflows", **refused)
    assert r.status_code == 400, r.text
    after = families((await client.get("/metrics")).text)
    for name, suffix in series:
        for status, expected in (("400", 1 if "webhook" in name else 2), ("500", 0)):
            got = total(after, name, suffix, status=status) - total(
                before, name, suffix, status=status
            )
            assert got == expected, (name, status, got)
