"""OpenTelemetry tracing: API request -> run start -> job -> step -> connector HTTP call.

Off by default. :func:`configure` turns it on with an OTLP/HTTP exporter when
``RAILYARD_OTLP_ENDPOINT`` is set (or with any exporter handed in, as tests do with
``InMemorySpanExporter``). While it is off every helper here is a no-op costing one flag
check, so the hot path pays nothing.

A trace crosses processes in the job: the dispatcher adds the W3C ``traceparent`` of the
current span to each job it enqueues (:func:`carrier`), and the worker continues that
trace (:func:`job_span`). A job re-dispatched by the sweeper has no parent and starts a
trace of its own. Spans (names and kinds):

- ``<METHOD> <route template>`` (SERVER): one API request, continuing an incoming
  ``traceparent`` header;
- ``run.start`` (INTERNAL): storing and starting a run (``railyard.run_id``,
  ``railyard.workflow_id``, ``railyard.trigger``);
- ``job <function>`` (CONSUMER): one arq job on a worker (``railyard.run_id``);
- ``step <step id>`` (INTERNAL): one attempt of an action step (``railyard.node_type``,
  ``railyard.attempt``);
- ``HTTP <METHOD>`` (CLIENT): one outbound HTTP request of a connector
  (:class:`TracingTransport`; ``url.full`` without its query string, which may hold keys).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
from opentelemetry import propagate
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

_state: dict[str, Any] = {"tracer": None, "provider": None}


def enabled() -> bool:
    """True once :func:`configure` installed an exporter in this process."""
    return _state["tracer"] is not None


def configure(
    *,
    endpoint: str = "",
    service_name: str = "railyard",
    exporter: SpanExporter | None = None,
) -> bool:
    """Turn tracing on for this process: spans go to ``exporter`` (exported at once, for
    tests) or, given ``endpoint``, to an OTLP/HTTP collector in batches. Neither: stays
    off. Returns whether tracing is on. Calling it again replaces the exporter."""
    if exporter is None and not endpoint:
        return enabled()
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    old = _state["provider"]
    _state["provider"] = provider
    _state["tracer"] = provider.get_tracer("railyard")
    if old is not None:
        old.shutdown()
    return True


def shutdown() -> None:
    """Flush and stop the exporter; tracing is off afterwards."""
    provider = _state["provider"]
    _state["provider"] = _state["tracer"] = None
    if provider is not None:
        provider.shutdown()


def carrier() -> dict[str, str]:
    """The W3C trace context of the current span (``{"traceparent": ...}``), empty when
    tracing is off or no span is current."""
    if not enabled():
        return {}
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


@contextlib.contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: Mapping[str, str] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Any]:
    """A span named ``name`` around the block (the current span's child, or ``parent``'s
    when a carrier is given); yields the span, or None when tracing is off. An exception
    leaving the block is recorded on the span and re-raised."""
    tracer = _state["tracer"]
    if tracer is None:
        yield None
        return
    ctx = propagate.extract(dict(parent)) if parent else None
    with tracer.start_as_current_span(
        name, context=ctx, kind=kind, attributes=dict(attributes or {})
    ) as current:
        yield current


def job_span(function: str, trace_context: Mapping[str, str] | None, run_id: str) -> Any:
    """The CONSUMER span of a worker job continuing the dispatcher's trace."""
    return span(
        f"job {function}",
        kind=SpanKind.CONSUMER,
        parent=trace_context,
        attributes={"railyard.run_id": run_id, "messaging.operation.name": function},
    )


def step_span(info: Any) -> Any:
    """The span of one attempt; ``info`` is the attempt's ``connectors.sdk.ActionInfo``."""
    return span(
        f"step {info.step_id}",
        attributes={
            "railyard.run_id": info.run_id,
            "railyard.step_id": info.step_id,
            "railyard.node_type": info.node_type,
            "railyard.attempt": info.attempt,
        },
    )


def server_span(method: str, route: str, headers: Mapping[str, str]) -> Any:
    """The SERVER span of an API request, continuing an incoming ``traceparent``."""
    parent = {k: v for k, v in headers.items() if k in ("traceparent", "tracestate")}
    return span(
        f"{method} {route}",
        kind=SpanKind.SERVER,
        parent=parent or None,
        attributes={"http.request.method": method, "http.route": route},
    )


def set_attributes(current: Any, **attributes: Any) -> None:
    """Add attributes to ``current`` (a span from :func:`span`; None is ignored)."""
    if current is not None:
        current.set_attributes({f"railyard.{k}": str(v) for k, v in attributes.items()})


class TracingTransport(httpx.AsyncBaseTransport):
    """An httpx transport that wraps each request to ``inner`` in a CLIENT span and sends
    the trace context along (``traceparent``). ``inner`` is not closed by this one unless
    ``close_inner``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, *, close_inner: bool = False) -> None:
        self.inner = inner
        self.close_inner = close_inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through ``inner`` inside its span."""
        tracer = _state["tracer"]
        if tracer is None:
            return await self.inner.handle_async_request(request)
        url = request.url.copy_with(query=None, fragment=None)
        with tracer.start_as_current_span(
            f"HTTP {request.method}",
            kind=SpanKind.CLIENT,
            attributes={
                "http.request.method": request.method,
                "url.full": str(url),
                "server.address": request.url.host,
            },
        ) as current:
            headers: dict[str, str] = {}
            propagate.inject(headers)
            for key, value in headers.items():
                request.headers[key] = value
            response = await self.inner.handle_async_request(request)
            current.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 500:
                current.set_status(Status(StatusCode.ERROR))
            return response

    async def aclose(self) -> None:
        """Close ``inner`` when this transport owns it."""
        if self.close_inner:
            await self.inner.aclose()
