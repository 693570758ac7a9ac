"""Content hash stability, graph JSON round trips and diagram decoding errors."""

from __future__ import annotations

import msgspec
import pytest

from designer_schema import (
    DiagramDecodeError,
    GraphDecodeError,
    Position,
    Viewport,
    WorkflowGraph,
    canonical_hash,
    diagram_from_json,
    diagram_to_json,
    graph_from_json,
    graph_to_json,
)

from ._fakes import compile_, happy_diagram


def compiled_hash(diagram: object) -> str:
    graph, diagnostics = compile_(diagram)  # type: ignore[arg-type]
    assert diagnostics == []
    assert graph is not None
    return graph.content_hash


def test_moving_nodes_and_panning_keeps_the_hash() -> None:
    diagram = happy_diagram()
    moved = msgspec.structs.replace(
        diagram,
        nodes=[
            msgspec.structs.replace(n, position=Position(n.position.x + 37, n.position.y - 5))
            for n in diagram.nodes
        ],
        viewport=Viewport(x=-120, y=44, zoom=2.5),
    )
    assert compiled_hash(moved) == compiled_hash(diagram)


def test_renaming_edge_ids_keeps_the_hash() -> None:
    diagram = happy_diagram()
    renamed = msgspec.structs.replace(
        diagram,
        edges=[
            msgspec.structs.replace(e, id=f"edge-{i}-renamed") for i, e in enumerate(diagram.edges)
        ],
    )
    assert compiled_hash(renamed) == compiled_hash(diagram)


def test_config_key_order_does_not_change_the_hash() -> None:
    diagram = happy_diagram()
    reordered = msgspec.structs.replace(
        diagram,
        nodes=[
            msgspec.structs.replace(n, config=dict(reversed(list(n.config.items()))))
            for n in diagram.nodes
        ],
    )
    assert compiled_hash(reordered) == compiled_hash(diagram)


def test_changing_config_changes_the_hash() -> None:
    diagram = happy_diagram()
    nodes = list(diagram.nodes)
    nodes[3] = msgspec.structs.replace(
        nodes[3], config={**nodes[3].config, "url": "https://example.test/other"}
    )
    assert compiled_hash(msgspec.structs.replace(diagram, nodes=nodes)) != compiled_hash(diagram)


def test_changing_an_expression_changes_the_hash() -> None:
    diagram = happy_diagram()
    nodes = list(diagram.nodes)
    nodes[2] = msgspec.structs.replace(nodes[2], config={"condition": "=prepare.total > 50"})
    assert compiled_hash(msgspec.structs.replace(diagram, nodes=nodes)) != compiled_hash(diagram)


def test_changing_a_label_changes_the_hash() -> None:
    diagram = happy_diagram()
    nodes = list(diagram.nodes)
    nodes[0] = msgspec.structs.replace(nodes[0], label="Incoming order")
    assert compiled_hash(msgspec.structs.replace(diagram, nodes=nodes)) != compiled_hash(diagram)


def test_hash_ignores_the_stored_hash_and_is_hex_sha256() -> None:
    graph, _ = compile_(happy_diagram())
    assert graph is not None
    tampered = msgspec.structs.replace(graph, content_hash="bogus")
    assert canonical_hash(tampered) == graph.content_hash
    assert int(graph.content_hash, 16) >= 0
    assert len(graph.content_hash) == 64


def test_graph_json_round_trip() -> None:
    graph, _ = compile_(happy_diagram())
    assert graph is not None
    data = graph_to_json(graph)
    assert graph_from_json(data, verify_hash=True) == graph
    assert graph_from_json(data.decode()) == graph


def test_graph_from_json_verifies_hash_when_asked() -> None:
    graph, _ = compile_(happy_diagram())
    assert graph is not None
    data = graph_to_json(msgspec.structs.replace(graph, trigger="prepare"))
    assert graph_from_json(data).trigger == "prepare"
    with pytest.raises(GraphDecodeError) as info:
        graph_from_json(data, verify_hash=True)
    assert info.value.path == "$.content_hash"


def test_graph_from_json_reports_path() -> None:
    with pytest.raises(GraphDecodeError) as info:
        graph_from_json(b'{"trigger": "t", "steps": [{"id": 1}], "transitions": []}')
    assert info.value.path == "$.steps[0].id"


def test_diagram_json_round_trip() -> None:
    diagram = happy_diagram()
    assert diagram_from_json(diagram_to_json(diagram)) == diagram
    assert diagram_from_json(diagram_to_json(diagram).decode()) == diagram


def test_diagram_from_json_minimal_document() -> None:
    assert diagram_from_json("{}").nodes == []


@pytest.mark.parametrize(
    ("text", "message", "path"),
    [
        ('{"nodes": [{"id": 1, "type": "x"}]}', "Expected `str`, got `int`", "$.nodes[0].id"),
        ('{"nodes": [{"type": "x"}]}', "Object missing required field `id`", "$.nodes[0]"),
        (
            '{"edges": [{"id": "e", "source": "a", "target": "b", "colour": "red"}]}',
            "Object contains unknown field `colour`",
            "$.edges[0]",
        ),
        ("[]", "Expected `object`, got `array`", "$"),
        ("{nope", "JSON is malformed", "$"),
        ('{"schema_version": 99}', "unsupported schema_version 99", "$.schema_version"),
    ],
)
def test_diagram_decode_errors(text: str, message: str, path: str) -> None:
    with pytest.raises(DiagramDecodeError) as info:
        diagram_from_json(text)
    assert info.value.message.startswith(message)
    assert info.value.path == path
    assert isinstance(info.value, ValueError)
    assert path in str(info.value)


def test_workflow_graph_is_plain_msgspec() -> None:
    graph, _ = compile_(happy_diagram())
    assert graph is not None
    assert msgspec.json.decode(msgspec.json.encode(graph), type=WorkflowGraph) == graph
