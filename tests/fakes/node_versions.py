"""A second version of a built-in node type, for the node-versioning tests.

``control.set`` version 2 changes one default: ``keep_input`` is true unless the node says
otherwise, so the mapped fields are merged over the input object (the kind of change n8n
ships as a new node version). Version 1 outputs only the mapped fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from backend.engine.nodes import control_set
from backend.engine.nodes.base import InlineResult, NodeType
from backend.engine.nodes.control_set import Set
from backend.engine.nodes.registry import NodeRegistry
from designer_schema.graph import Step


class SetKeepingInput(Set):
    """Set, version 2: ``keep_input`` defaults to true."""

    def evaluate(self, step: Step, config: dict[str, Any], data: Any) -> InlineResult:
        return super().evaluate(step, {"keep_input": True, **config}, data)


SET_V2 = NodeType(
    msgspec.structs.replace(
        control_set.SPEC, version=2, description="Builds a new object over the input's fields."
    ),
    SetKeepingInput(),
)


@contextmanager
def registered(nodes: NodeRegistry, node: NodeType = SET_V2) -> Iterator[NodeType]:
    """``node`` registered in ``nodes`` while inside (the registry is left as it was)."""
    nodes.register(node)
    try:
        yield node
    finally:
        nodes.unregister(*node.key)
