"""A second version of a built-in node type, for the node-versioning tests.

``control.set`` version 2 changes one default: ``keep_input`` is true unless the node says
otherwise, so the mapped fields are merged over the input object (the kind of change n8n
ships as a new node version). Version 1 outputs only the mapped fields.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import msgspec

from backend.engine.nodes import control_set
from backend.engine.nodes.base import NodeType
from backend.engine.nodes.config import config_schema
from backend.engine.nodes.control_set import Set, SetConfig
from backend.engine.nodes.registry import NodeRegistry


class SetConfigV2(SetConfig, kw_only=True, frozen=True):
    """Set version 2's config: ``keep_input`` defaults to true."""

    keep_input: Annotated[bool, msgspec.Meta(title="Keep input fields")] = True


class SetKeepingInput(Set):
    """Set, version 2: its config is :class:`SetConfigV2`."""

    config_type = SetConfigV2


SET_V2 = NodeType(
    msgspec.structs.replace(
        control_set.SPEC,
        version=2,
        description="Builds a new object over the input's fields.",
        config_schema=config_schema(SetConfigV2),
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
