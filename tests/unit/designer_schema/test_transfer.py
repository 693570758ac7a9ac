"""The export format: decoding with clear errors, and taking fields out / putting them back."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from designer_schema.diagram import Diagram, Edge
from designer_schema.transfer import (
    EXPORT_FORMAT,
    CredentialRef,
    ExportedWorkflow,
    TransferError,
    WorkflowExport,
    decode_export,
    encode_export,
    with_fields,
    without_fields,
)
from tests.diagrams import diagram, node
from tests.unit.designer_schema._fakes import compile_, only
from tests.unit.designer_schema._fakes import node as fake_node


def document(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "format_version": 1,
        "workflow": {"name": "Orders"},
        "diagram": diagram([node("hook", "trigger.webhook"), node("mail", "email.send")], []),
        "credentials": [{"node": "mail", "field": "credential", "type": "smtp", "name": "Mail"}],
        "workflows": [{"node": None, "field": "settings.error_workflow_id", "name": "On error"}],
    }
    doc.update(overrides)
    return doc


def test_round_trip_through_json() -> None:
    doc = decode_export(document())
    assert doc.credentials == [CredentialRef("mail", "credential", "smtp", "Mail")]
    assert decode_export(encode_export(doc)) == doc
    assert b'\n  "format": "railyard/workflow"' in encode_export(doc)


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"format": "n8n"}, "$.format", "not a Railyard workflow export"),
        ({"format_version": 2}, "$.format_version", "unsupported format_version 2"),
        ({"format_version": 0}, "$.format_version", "unsupported format_version 0"),
        ({"extra": 1}, "$", "unknown field `extra`"),
        ({"workflow": {"name": 5}}, "$.workflow.name", "Expected `str`"),
        (
            {"credentials": [{"node": "nope", "field": "c", "type": "smtp"}]},
            "$.credentials[0].node",
            "no node 'nope'",
        ),
        (
            {"workflows": [{"node": None, "field": "workflow_id"}]},
            "$.workflows[0].node",
            "must be the setting",
        ),
        (
            {
                "credentials": [
                    {"node": "mail", "field": "credential", "type": "smtp"},
                    {"node": "mail", "field": "credential", "type": "smtp"},
                ]
            },
            "$.credentials[1]",
            "referenced twice",
        ),
    ],
)
def test_bad_documents_name_the_place(change: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(TransferError) as err:
        decode_export(document(**change))
    assert err.value.path == path
    assert words in err.value.message


def test_bad_diagram_schema_version_and_malformed_json() -> None:
    doc = document()
    doc["diagram"]["schema_version"] = 9
    with pytest.raises(TransferError) as err:
        decode_export(doc)
    assert err.value.path == "$.diagram.schema_version"
    with pytest.raises(TransferError) as err:
        decode_export(b'{"format": ')
    assert err.value.path == "$"


def test_fields_taken_out_and_put_back() -> None:
    d = msgspec.convert(
        diagram([node("mail", "email.send", credential="c-1", to=["a@b.c"])], []), Diagram
    )
    stripped = without_fields(d, {("mail", "credential")})
    assert stripped.nodes[0].config == {"to": ["a@b.c"]}
    restored = with_fields(stripped, {("mail", "credential"): "c-2", ("mail", "to"): None})
    assert restored.nodes[0].config == {"credential": "c-2"}
    assert d.nodes[0].config["credential"] == "c-1"  # the input is not changed


def test_export_struct_defaults() -> None:
    doc = WorkflowExport(EXPORT_FORMAT, 1, ExportedWorkflow("W"), Diagram())
    assert decode_export(encode_export(doc)).credentials == []


def test_an_unbound_reference_is_a_compile_error_until_the_field_holds_a_value() -> None:
    call = fake_node("call", "http.request", url="https://example.test", method="GET")
    start = fake_node("hook", "trigger.webhook")
    edges = [Edge(id="e", source="hook", target="call")]
    imported = with_fields(Diagram(nodes=[start, call], edges=edges), {("call", "token"): None})
    assert imported.nodes[1].unbound == ["token"] and imported.nodes[0].unbound is msgspec.UNSET
    assert b'"unbound"' not in msgspec.json.encode(imported.nodes[0])
    graph, found = compile_(imported)
    assert graph is None
    assert [(d.severity, d.node_id, d.field) for d in only(found, "unbound_reference")] == [
        ("error", "call", "token")
    ]
    # a value in the field satisfies it; binding it by import takes the mark away
    filled = msgspec.structs.replace(
        imported,
        nodes=[
            start,
            msgspec.structs.replace(imported.nodes[1], config={**call.config, "token": "x"}),
        ],
    )
    assert only(compile_(filled)[1], "unbound_reference") == []
    rebound = with_fields(imported, {("call", "token"): "x"})
    assert rebound.nodes[1].unbound is msgspec.UNSET
    assert msgspec.json.decode(msgspec.json.encode(imported), type=Diagram) == imported
