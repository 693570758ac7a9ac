"""What changed between two diagrams: nodes and edges added, removed or changed, and each
changed node's fields (label, type, config) one by one. Positions and the viewport are
ignored: moving a node is not a change of the workflow.

Pure (msgspec and stdlib only). Identity:

- a node is its ``id`` (the step id expressions refer to);
- an edge is its endpoints ``(source, source_port, target, target_port)``, not its ``id``:
  deleting an edge and drawing it again gives it a new id but changes nothing.

Config fields are compared by path: nested objects are walked key by key (``headers.Accept``,
``retry.max_attempts``), lists and scalars are compared as whole values, except ordered
field lists (``[{"name", "value"}, ...]``, the Set's *Fields*,
:mod:`designer_schema.ordered_fields`), which are walked by name like objects (and against
the older object form), with one more change at the list's own path when only the order
of the names they share changed. A field present on one side only is ``added`` or
``removed``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from designer_schema.diagram import Diagram, Edge, Node
from designer_schema.ordered_fields import as_field_map

ChangeKind = Literal["added", "removed", "changed"]


class FieldChange(msgspec.Struct, frozen=True):
    """One field of a node that differs.

    ``path`` is ``label``, ``type`` or ``config.<key>[.<key>...]``; ``before``/``after``
    are the JSON values on each side (``None`` on the side where ``kind`` says the field is
    absent).
    """

    path: str
    kind: ChangeKind
    before: Any = None
    after: Any = None


class NodeChange(msgspec.Struct, frozen=True):
    """A node added, removed or changed; ``label`` and ``type`` are the newer side's
    (the older side's for a removed node); ``fields`` lists a changed node's differences
    (empty for added and removed nodes)."""

    id: str
    kind: ChangeKind
    type: str
    label: str
    fields: list[FieldChange] = msgspec.field(default_factory=list)


class EdgeChange(msgspec.Struct, frozen=True):
    """An edge added or removed (edges have no fields of their own: a rewired edge is one
    removed and one added). ``id`` is the edge's id on its side."""

    id: str
    kind: Literal["added", "removed"]
    source: str
    source_port: str
    target: str
    target_port: str


class DiagramDiff(msgspec.Struct, frozen=True):
    """The differences from ``before`` to ``after`` (see :func:`diff_diagrams`), nodes and
    edges in a stable order (the newer diagram's order, removed ones after), with counts of
    what is unchanged."""

    nodes: list[NodeChange]
    edges: list[EdgeChange]
    unchanged_nodes: int
    unchanged_edges: int

    @property
    def empty(self) -> bool:
        """Whether the two diagrams are the same workflow (positions aside)."""
        return not self.nodes and not self.edges

    def summary(self) -> dict[str, int]:
        """Counts by kind: ``nodes_added``, ``nodes_removed``, ``nodes_changed``,
        ``edges_added``, ``edges_removed``."""
        out = {
            "nodes_added": 0,
            "nodes_removed": 0,
            "nodes_changed": 0,
            "edges_added": 0,
            "edges_removed": 0,
        }
        for n in self.nodes:
            out[f"nodes_{n.kind}"] += 1
        for e in self.edges:
            out[f"edges_{e.kind}"] += 1
        return out


_ABSENT = object()


def _walk(before: Any, after: Any, path: str, out: list[FieldChange]) -> None:
    """Append the differences of two JSON values at ``path`` (iterative over object keys,
    which stay few and shallow: configs are bounded by ``DiagramLimits``)."""
    stack: list[tuple[Any, Any, str]] = [(before, after, path)]
    found: list[FieldChange] = []
    while stack:
        old, new, where = stack.pop()
        if old is _ABSENT:
            found.append(FieldChange(where, "added", None, new))
        elif new is _ABSENT:
            found.append(FieldChange(where, "removed", old, None))
        elif isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new), key=str):
                stack.append((old.get(key, _ABSENT), new.get(key, _ABSENT), f"{where}.{key}"))
        elif (fields := _field_maps(old, new)) is not None:
            a, b = fields
            for key in sorted(set(a) | set(b)):
                stack.append((a.get(key, _ABSENT), b.get(key, _ABSENT), f"{where}.{key}"))
            if [k for k in a if k in b] != [k for k in b if k in a]:
                found.append(FieldChange(where, "changed", list(a), list(b)))
        elif not _same(old, new):
            found.append(FieldChange(where, "changed", old, new))
    out.extend(sorted(found, key=lambda c: c.path))


def _field_maps(old: Any, new: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Both sides as ``{name: value}`` when one is an ordered field list and the other one
    too or an object (the older form of the same field); else ``None``."""
    a, b = as_field_map(old), as_field_map(new)
    if a is None and b is None:
        return None
    a = a if a is not None else (dict(old) if isinstance(old, dict) else None)
    b = b if b is not None else (dict(new) if isinstance(new, dict) else None)
    return (a, b) if a is not None and b is not None else None


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1`` and ``1.0`` are equal, ``True`` and ``1`` are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def node_fields(before: Node, after: Node) -> list[FieldChange]:
    """The fields of one node that differ (``label``, ``type``, then ``config.*`` by path);
    the position is ignored."""
    out: list[FieldChange] = []
    if before.label != after.label:
        out.append(FieldChange("label", "changed", before.label, after.label))
    if before.type != after.type:
        out.append(FieldChange("type", "changed", before.type, after.type))
    _walk(before.config, after.config, "config", out)
    return out


def _edge_key(e: Edge) -> tuple[str, str, str, str]:
    return (e.source, e.source_port, e.target, e.target_port)


def _edge_change(e: Edge, kind: Literal["added", "removed"]) -> EdgeChange:
    return EdgeChange(e.id, kind, e.source, e.source_port, e.target, e.target_port)


def diff_diagrams(before: Diagram, after: Diagram) -> DiagramDiff:
    """Compare two diagrams (e.g. version 3 and the draft), ignoring positions and viewport.

    Runs in O(n + e) dictionary work for n nodes and e edges. Duplicate node ids or edge
    endpoints (which the compiler reports) are compared first occurrence to first
    occurrence, the rest as added/removed.
    """
    old_nodes: dict[str, Node] = {}
    for n in before.nodes:
        old_nodes.setdefault(n.id, n)
    new_ids: set[str] = set()
    nodes: list[NodeChange] = []
    unchanged_nodes = 0
    for n in after.nodes:
        old = old_nodes.get(n.id) if n.id not in new_ids else None
        new_ids.add(n.id)
        if old is None:
            nodes.append(NodeChange(n.id, "added", n.type, n.label))
            continue
        fields = node_fields(old, n)
        if fields:
            nodes.append(NodeChange(n.id, "changed", n.type, n.label, fields))
        else:
            unchanged_nodes += 1
    seen_old: set[str] = set()
    for n in before.nodes:
        if n.id not in new_ids or n.id in seen_old:
            nodes.append(NodeChange(n.id, "removed", n.type, n.label))
        seen_old.add(n.id)

    old_edges: dict[tuple[str, str, str, str], list[Edge]] = {}
    for e in before.edges:
        old_edges.setdefault(_edge_key(e), []).append(e)
    edges: list[EdgeChange] = []
    unchanged_edges = 0
    for e in after.edges:
        match = old_edges.get(_edge_key(e))
        if match:
            match.pop(0)
            unchanged_edges += 1
        else:
            edges.append(_edge_change(e, "added"))
    for e in before.edges:  # what is left unmatched, in the older diagram's order
        left = old_edges.get(_edge_key(e))
        if left and left[0] is e:
            edges.append(_edge_change(left.pop(0), "removed"))
    return DiagramDiff(nodes, edges, unchanged_nodes, unchanged_edges)
