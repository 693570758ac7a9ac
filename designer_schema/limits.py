"""Size limits of a diagram and of JSON documents, checked before anything stores them.

The values come from the installation's settings (docs/operations.md, "Limits"); this
module only measures and compares, without recursion, so a document nested 100,000 levels
deep is measured as safely as a flat one.
"""

from __future__ import annotations

from typing import Any

import msgspec

from designer_schema.diagram import Diagram


class DiagramLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How large a diagram may be.

    Attributes:
        max_nodes: nodes in one diagram.
        max_edges: edges in one diagram.
        max_config_depth: nesting of one node's ``config`` (an object holding a scalar is 1).
        max_config_bytes: size of one node's ``config`` encoded as JSON, bytes.
    """

    max_nodes: int = 5000
    max_edges: int = 10000
    max_config_depth: int = 32
    max_config_bytes: int = 131072


class LimitError(ValueError):
    """A document is over a limit.

    Attributes:
        message: what is over which limit, with both numbers.
        path: where, e.g. ``nodes[3].config`` (``""`` for the whole document).
        limit: the setting's name, e.g. ``max_config_depth``.
    """

    def __init__(self, message: str, *, path: str, limit: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.limit = limit


def json_depth(value: Any, stop_after: int | None = None) -> int:
    """Nesting depth of a JSON-like value: a scalar is 0, ``{"a": 1}`` and ``[1]`` are 1.

    Iterative (no recursion). With ``stop_after``, returns as soon as the depth passes it
    (the result is then ``stop_after + 1``), so measuring a hostile document costs no more
    than its first ``stop_after + 1`` levels of every branch.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if stop_after is not None and deepest > stop_after:
                return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def check_json_depth(value: Any, max_depth: int, *, path: str, limit: str) -> None:
    """Raise :class:`LimitError` when ``value`` nests deeper than ``max_depth`` levels."""
    if json_depth(value, max_depth) > max_depth:
        raise LimitError(
            f"{path or 'the document'} is nested deeper than {max_depth} levels (limit {limit})",
            path=path,
            limit=limit,
        )


def check_diagram(diagram: Diagram, limits: DiagramLimits) -> None:
    """Raise :class:`LimitError` for the first limit ``diagram`` is over (see
    :class:`DiagramLimits`): node count, edge count, then each node's config depth and size."""
    if len(diagram.nodes) > limits.max_nodes:
        raise LimitError(
            f"the diagram has {len(diagram.nodes):,} nodes, over the limit of "
            f"{limits.max_nodes:,} (max_diagram_nodes)",
            path="nodes",
            limit="max_diagram_nodes",
        )
    if len(diagram.edges) > limits.max_edges:
        raise LimitError(
            f"the diagram has {len(diagram.edges):,} edges, over the limit of "
            f"{limits.max_edges:,} (max_diagram_edges)",
            path="edges",
            limit="max_diagram_edges",
        )
    for index, node in enumerate(diagram.nodes):
        where = f"nodes[{index}].config"
        check_json_depth(node.config, limits.max_config_depth, path=where, limit="max_config_depth")
        size = len(msgspec.json.encode(node.config))
        if size > limits.max_config_bytes:
            raise LimitError(
                f"{where} is {size:,} bytes of JSON, over the limit of "
                f"{limits.max_config_bytes:,} (max_config_bytes)",
                path=where,
                limit="max_config_bytes",
            )
