"""CloudEvents in the HTTP binding's three modes (backend/triggers/cloudevents.py) and what
the designer knows of a CloudEvents webhook's run input (trigger.webhook version 2)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import msgspec
import pytest
from cloudevents.core.bindings.http import to_binary_event, to_structured_event
from cloudevents.core.v1.event import CloudEvent

from backend.engine.expression_paths import JsonataReader
from backend.engine.expressions import JsonataChecker
from backend.engine.nodes import NODE_TYPES
from backend.services.connectors.catalog import AppCatalog
from backend.services.triggers.webhook_versions import published_config
from backend.triggers.cloudevents import (
    BATCH,
    STRUCTURED,
    CloudEventError,
    batched,
    dedupe_value,
    parse_cloudevents,
)
from designer_schema import Diagram, compile_diagram
from tests.diagrams import diagram, edge, node

ATTRIBUTES = {
    "specversion": "1.0",
    "id": "A234-1234-1234",
    "source": "https://example.com/orders",
    "type": "com.example.order.created",
}


def structured(**event: Any) -> tuple[dict[str, str], bytes]:
    return {"content-type": STRUCTURED}, json.dumps({**ATTRIBUTES, **event}).encode()


def test_binary_mode_as_the_sdk_sends_it() -> None:
    event = CloudEvent(
        {
            **ATTRIBUTES,
            "subject": "order 17",
            "traceparent": "00-ab-cd-01",
            "datacontenttype": "application/json",
        },
        {"order": 17},
    )
    message = to_binary_event(event)
    headers = {k.lower(): v for k, v in message.headers.items()}
    [parsed] = parse_cloudevents(headers, message.body)
    assert parsed.input == {
        **ATTRIBUTES,
        "subject": "order 17",
        "time": unquote(headers["ce-time"]),  # the SDK's sender sets a time
        "datacontenttype": "application/json",
        "dataschema": None,
        "extensions": {"traceparent": "00-ab-cd-01"},
        "data": {"order": 17},
    }
    assert not batched(headers)


def test_binary_mode_percent_decoding_text_and_bytes() -> None:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "1",
        "ce-source": "/caf%C3%A9",
        "ce-type": "t",
        "content-type": "text/plain; charset=utf-8",
    }
    [text] = parse_cloudevents(headers, "naïve".encode())
    assert text.input["source"] == "/café" and text.input["data"] == "naïve"
    assert text.input["time"] is None  # never invented
    [raw] = parse_cloudevents({**headers, "content-type": "application/octet-stream"}, b"\0\1")
    assert raw.input["data"] == {
        "$base64": "AAE=",
        "content_type": "application/octet-stream",
        "size": 2,
    }
    [empty] = parse_cloudevents({k: v for k, v in headers.items() if k != "content-type"}, b"")
    assert empty.input["data"] is None and empty.input["datacontenttype"] is None


def test_structured_mode_as_the_sdk_sends_it() -> None:
    message = to_structured_event(
        CloudEvent({**ATTRIBUTES, "datacontenttype": "application/json"}, {"order": 17})
    )
    headers = {k.lower(): v for k, v in message.headers.items()}
    [parsed] = parse_cloudevents(headers, message.body)
    assert parsed.input["data"] == {"order": 17}
    assert parsed.input["id"] == ATTRIBUTES["id"] and parsed.input["time"].endswith("Z")


def test_structured_data_base64_and_extensions() -> None:
    headers, body = structured(data_base64="AAE=", datacontenttype="image/png", partition=3)
    [parsed] = parse_cloudevents(headers, body)
    assert parsed.input["data"] == {"$base64": "AAE=", "content_type": "image/png", "size": 2}
    assert parsed.input["extensions"] == {"partition": 3}


def test_batched_mode_keeps_the_order() -> None:
    events = [{**ATTRIBUTES, "id": str(n), "data": {"n": n}} for n in range(3)]
    headers = {"content-type": f"{BATCH}; charset=utf-8"}
    parsed = parse_cloudevents(headers, json.dumps(events).encode())
    assert [p.input["data"] for p in parsed] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert batched(headers)
    assert parse_cloudevents(headers, b"[]") == []


@pytest.mark.parametrize(
    ("headers", "body", "message"),
    [
        (
            {"content-type": STRUCTURED},
            b'{"specversion": "1.0", "source": "s", "type": "t"}',
            "not a valid CloudEvent: missing required attribute id",
        ),
        (
            {"ce-id": "1", "ce-type": "t"},
            b"",
            "missing required headers ce-specversion, ce-source",
        ),
        (
            {"content-type": BATCH},
            b'[{"specversion": "1.0", "id": "1", "source": "s", "type": "t"}, {"id": "2"}]',
            "event 1 of the batch: not a valid CloudEvent: missing required attributes "
            "specversion, source, type",
        ),
        ({"content-type": BATCH}, b'{"id": "1"}', "must be a JSON array of events"),
        ({"content-type": "application/json"}, b"{}", "not a CloudEvent: this webhook takes"),
        ({"content-type": STRUCTURED}, b"{bad", "malformed JSON body"),
        ({"content-type": STRUCTURED}, b"[]", "a CloudEvent must be a JSON object"),
        (
            {"content-type": "application/cloudevents+avro"},
            b"",
            "event format application/cloudevents+avro is not supported",
        ),
    ],
)
def test_invalid_requests_say_what_is_wrong(
    headers: dict[str, str], body: bytes, message: str
) -> None:
    with pytest.raises(CloudEventError) as err:
        parse_cloudevents(headers, body)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"specversion": "2.0"}, "specversion '2.0' is not supported"),
        ({"time": "yesterday"}, "time: 'yesterday' is not an RFC 3339 timestamp"),
        ({"id": 17}, "id: Attribute 'id' must be"),
        ({"Bad-Name": "x"}, "Bad-Name: Extension attribute 'Bad-Name' should only contain"),
        ({"data": 1, "data_base64": "AA=="}, "data or data_base64, not both"),
        ({"data_base64": "%%%"}, "data_base64 is not base64"),
    ],
)
def test_attributes_are_checked_by_the_sdk(event: dict[str, Any], message: str) -> None:
    with pytest.raises(CloudEventError) as err:
        parse_cloudevents(*structured(**event))
    assert message in str(err.value)


def test_binary_json_data_must_be_json() -> None:
    headers = {f"ce-{k}": v for k, v in ATTRIBUTES.items()} | {"content-type": "application/json"}
    with pytest.raises(CloudEventError, match=r"data: malformed JSON body: .* at line 1, column 2"):
        parse_cloudevents(headers, b"{bad")


def test_dedupe_value_is_per_source_and_id() -> None:
    assert dedupe_value("a", "b") == dedupe_value("a", "b")
    assert dedupe_value("a", "b") != dedupe_value("a", "c") != dedupe_value("b", "b")
    assert dedupe_value("a:b", "c") != dedupe_value("a", "b:c")
    assert dedupe_value("s" * 5000, "1").startswith("ce:") and len(dedupe_value("s", "1")) == 43


def _flow_diagnostics(cloudevents: bool | None, mapping: dict[str, str]) -> list[str]:
    config: dict[str, Any] = {} if cloudevents is None else {"cloudevents": cloudevents}
    doc = diagram(
        [
            node("hook", "trigger.webhook", **config),
            node("set_1", "control.set", mapping=mapping),
        ],
        [edge("hook", "set_1")],
    )
    graph, found = compile_diagram(
        msgspec.convert(doc, Diagram), AppCatalog(), JsonataChecker(), JsonataReader()
    )
    assert graph is None or graph.steps[0].type_version >= 2
    return [f"{d.field}:{d.code}" for d in found]


@pytest.mark.parametrize("off", [None, False])
def test_the_designer_knows_the_request_fields_without_cloudevents(off: bool | None) -> None:
    assert _flow_diagnostics(off, {"a": "=body.x", "b": "=headers.y"}) == []
    assert _flow_diagnostics(off, {"c": "=data.x"}) == ["mapping.c:unknown_field"]


def test_the_designer_knows_the_event_fields_with_cloudevents() -> None:
    mapping = {"a": "=data.x", "b": "=type", "c": "=extensions.traceparent", "d": "=subject"}
    assert _flow_diagnostics(True, mapping) == []
    assert _flow_diagnostics(True, {"e": "=body.x"}) == ["mapping.e:unknown_field"]


def test_version_1_is_kept_for_published_graphs() -> None:
    assert NODE_TYPES.versions("trigger.webhook")[:3] == [1, 2, 3]
    v1 = NODE_TYPES.get("trigger.webhook", 1)
    assert v1 is not None and "cloudevents" not in v1.spec.config_schema["properties"]
    v2 = NODE_TYPES.get("trigger.webhook", 2)
    assert v2 is not None and "failure_answer" not in v2.spec.config_schema["properties"]


def test_only_a_published_version_2_step_takes_cloudevents() -> None:
    def takes_cloudevents(step: dict[str, Any], config: dict[str, Any]) -> bool:
        return published_config({**step, "config": config}).cloudevents

    on = {"cloudevents": True}
    assert takes_cloudevents({"type": "trigger.webhook", "type_version": 2}, on)
    assert not takes_cloudevents({"type": "trigger.webhook", "type_version": 1}, on)
    assert not takes_cloudevents({"type": "trigger.webhook"}, on)  # graphs before versions
    assert not takes_cloudevents({"type": "trigger.webhook", "type_version": 2}, {})
    assert not takes_cloudevents({"type": "acme.hook", "type_version": 2}, on)


def test_a_cloudevents_webhook_output_requires_only_the_event_fields() -> None:
    from designer_schema.dataflow import DataFlow

    doc = msgspec.convert(diagram([node("hook", "trigger.webhook", cloudevents=True)], []), Diagram)
    schema = DataFlow.of_diagram(doc, AppCatalog(), JsonataReader()).output_schema("hook")
    assert "method" not in schema["properties"] and "method" not in schema["required"]
    assert {"id", "source", "type", "data"} <= set(schema["required"])
