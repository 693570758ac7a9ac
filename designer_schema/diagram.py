"""The designer's document: nodes, edges and a viewport.

A diagram is what the browser canvas edits and what the server stores as a workflow's
draft. It is never executed: :func:`designer_schema.compiler.compile_diagram` turns it
into a :class:`designer_schema.graph.WorkflowGraph`.

Positions and the viewport are in canvas pixels (SVG user units); ``zoom`` is a factor
(1.0 = 100 %).
"""

from __future__ import annotations

from typing import Any

import msgspec

from designer_schema.errors import SchemaDecodeError

DIAGRAM_SCHEMA_VERSION = 1

NOTE_TYPE = "ui.note"
"""Node type of a sticky note: a comment on the canvas (``config.text``, optional
``config.color``). Notes take no edges and the compiler leaves them out of the graph."""


class Position(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Top-left corner of a node on the canvas, in canvas pixels."""

    x: float = 0.0
    y: float = 0.0


class Node(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One node drawn on the canvas.

    ``type`` names a node type of the catalog (``trigger.webhook``, ``control.if``,
    ``http.request`` ...). ``config`` maps field names of the node type's config schema to
    values; a string value starting with ``=`` is a JSONata expression (see docs/expressions.md).

    ``unbound`` names the config fields an import left empty because it could not bind
    their reference (a credential or called workflow) for the importer: each is a
    compile error (``unbound_reference``) until the field holds a value. Absent (unset,
    and left out of the JSON) on every other node.

    ``unparsed`` maps a JSON setting's field name to the text the user typed there when
    that text is not valid JSON (the config keeps the field's last valid value): the
    draft loses no edit, the designer shows the text again with its parse error, and
    each is a compile error (``invalid_config`` at that field) until it parses. Absent
    (unset, and left out of the JSON) when every JSON setting parses.
    """

    id: str
    type: str
    label: str = ""
    position: Position = Position()
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    unbound: list[str] | msgspec.UnsetType = msgspec.UNSET
    unparsed: dict[str, str] | msgspec.UnsetType = msgspec.UNSET


class Edge(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A connection from an output port of one node to an input port of another."""

    id: str
    source: str
    target: str
    source_port: str = "out"
    target_port: str = "in"


class Viewport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Pan offset (canvas pixels) and zoom factor of the canvas."""

    x: float = 0.0
    y: float = 0.0
    zoom: float = 1.0


class Diagram(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole designer document, as stored in a workflow's draft and in each version."""

    nodes: list[Node] = msgspec.field(default_factory=list)
    edges: list[Edge] = msgspec.field(default_factory=list)
    viewport: Viewport = Viewport()
    schema_version: int = DIAGRAM_SCHEMA_VERSION


def diagram_json_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of :class:`Diagram`, for external tools."""
    return msgspec.json.schema(Diagram)


class DiagramDecodeError(SchemaDecodeError):
    """A diagram document is malformed JSON or does not match :class:`Diagram`.

    ``message`` says what is wrong and ``path`` where, e.g. ``$.nodes[0].id``.
    """


def diagram_from_json(data: bytes | str) -> Diagram:
    """Decode a diagram document (JSON text or bytes) into a :class:`Diagram`.

    Unknown fields are rejected. Raises :class:`DiagramDecodeError` (a ``ValueError``) when
    the JSON is malformed, does not match the schema (``message`` and ``path`` name the
    problem, e.g. ``Expected `str`, got `int``` at ``$.nodes[0].id``), or has a
    ``schema_version`` other than :data:`DIAGRAM_SCHEMA_VERSION`.
    """
    try:
        diagram = msgspec.json.decode(data, type=Diagram)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise DiagramDecodeError.from_msgspec(exc) from exc
    if diagram.schema_version != DIAGRAM_SCHEMA_VERSION:
        raise DiagramDecodeError(
            f"unsupported schema_version {diagram.schema_version}, "
            f"expected {DIAGRAM_SCHEMA_VERSION}",
            "$.schema_version",
        )
    return diagram


def diagram_to_json(diagram: Diagram) -> bytes:
    """Encode ``diagram`` as compact JSON bytes (the inverse of :func:`diagram_from_json`)."""
    return msgspec.json.encode(diagram)
