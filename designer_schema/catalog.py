"""What the compiler knows about node types: a small catalog protocol.

``designer_schema`` never imports connectors. The application hands the compiler an object
implementing :class:`Catalog`, built from the engine's control nodes and the installed
connectors, and an :class:`ExpressionChecker` that knows the expression language.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import msgspec

NodeKind = Literal["trigger", "action", "control"]


class NodeTypeSpec(msgspec.Struct, frozen=True):
    """Static description of a node type.

    - ``type``: dotted name, unique in the catalog (``control.if``).
    - ``kind``: ``trigger`` nodes start runs and have no input port; ``control`` nodes are
      evaluated inline by the engine; ``action`` nodes run as jobs on workers.
    - ``inputs`` / ``outputs``: port names. A node type whose ``dynamic_outputs`` names a
      config field takes its output ports from that field (a list of strings) plus
      ``outputs``.
    - ``config_schema``: JSON Schema (an ``object``) of the node's config; ``required`` lists
      the fields that must be set. Fields listed in ``expression_fields`` accept a JSONata
      expression (a string starting with ``=``); other fields are literal values.
    - ``error_port``: when true every node of this type has an extra ``error`` output port
      that is taken when the step fails (any node gets one with the config
      ``"on_error": "error_port"``).
    - ``version``: the node-type version (an integer >= 1) this spec describes. The
      catalog hands out the latest; the compiler pins it in each step
      (``Step.type_version``) so a published graph keeps running that version's behaviour.
    - ``output_schema``: JSON Schema of the step output (``{}``: anything). Pass-through
      nodes say ``"x-same-as-input": true``: the output is the step input.
    - ``config_join``: the node's own ``mode`` and ``count`` config fields are its join
      spec (the Join node); the compiler turns them into ``Step.join``.
    """

    type: str
    label: str
    kind: NodeKind
    category: str = "Core"
    description: str = ""
    icon: str = ""
    inputs: tuple[str, ...] = ("in",)
    outputs: tuple[str, ...] = ("out",)
    config_schema: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    expression_fields: tuple[str, ...] = ()
    dynamic_outputs: str | None = None
    error_port: bool = False
    connector: str = "core"
    version: int = 1
    output_schema: dict[str, Any] = msgspec.field(default_factory=dict)
    config_join: bool = False


class Catalog(Protocol):
    """Lookup of node types by name."""

    def get(self, node_type: str) -> NodeTypeSpec | None:
        """Return the spec of ``node_type`` or ``None`` when it is unknown."""
        ...

    def all(self) -> list[NodeTypeSpec]:
        """Return every node type, in palette order."""
        ...


class ExpressionChecker(Protocol):
    """Syntax check of one expression source (without the leading ``=``)."""

    def check(self, source: str) -> str | None:
        """Return ``None`` when ``source`` parses, else a one-line error message."""
        ...


class StaticCatalog:
    """A :class:`Catalog` over a fixed list of specs (later specs win on name clashes)."""

    def __init__(self, specs: list[NodeTypeSpec]) -> None:
        self._specs: dict[str, NodeTypeSpec] = {}
        for spec in specs:
            self._specs[spec.type] = spec

    def get(self, node_type: str) -> NodeTypeSpec | None:
        return self._specs.get(node_type)

    def all(self) -> list[NodeTypeSpec]:
        return list(self._specs.values())
