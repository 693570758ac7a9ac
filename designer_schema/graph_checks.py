"""Edges and the graph's shape: ports that exist, reachability, cycles.

Used by :func:`designer_schema.compiler.compile_diagram` after the nodes are compiled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagnostic_sink import DiagnosticSink
from designer_schema.diagram import Diagram, Node
from designer_schema.graph import Step


def input_ports(spec: NodeTypeSpec) -> tuple[str, ...]:
    """The input ports of a node type (a trigger has none, whatever its spec says)."""
    return () if spec.kind == "trigger" else spec.inputs


def check_edges(
    diagram: Diagram,
    nodes: Mapping[str, Node],
    specs: Mapping[str, NodeTypeSpec],
    steps: Mapping[str, Step],
    adjacency: dict[str, list[str]],
    incoming_count: dict[str, int],
    sink: DiagnosticSink,
) -> None:
    """Check every edge (``duplicate_edge``, ``dangling_edge``, ``unknown_port``) and
    fill ``adjacency`` (source -> targets) and ``incoming_count`` (node -> edges in)."""
    edge_ids: set[str] = set()
    connections: set[tuple[str, str, str, str]] = set()
    for edge in diagram.edges:
        if edge.id in edge_ids:
            sink.add(
                "duplicate_edge",
                f"edge id {edge.id!r} is used by more than one edge",
                edge_id=edge.id,
            )
        edge_ids.add(edge.id)

        missing = [end for end in (edge.source, edge.target) if end not in nodes]
        if missing:
            sink.add(
                "dangling_edge",
                "edge points at missing node(s) " + ", ".join(repr(m) for m in missing),
                edge_id=edge.id,
                node_id=edge.source if edge.source in nodes else None,
            )
            continue

        key = (edge.source, edge.source_port, edge.target, edge.target_port)
        if key in connections:
            sink.add(
                "duplicate_edge",
                f"{edge.source}.{edge.source_port} is already connected to "
                f"{edge.target}.{edge.target_port}",
                edge_id=edge.id,
                node_id=edge.source,
            )
        connections.add(key)

        source_step = steps.get(edge.source)
        if source_step is not None and edge.source_port not in source_step.outputs:
            sink.add(
                "unknown_port",
                f"node {edge.source!r} has no output port {edge.source_port!r}; "
                f"its outputs are {port_list(source_step.outputs)}",
                edge_id=edge.id,
                node_id=edge.source,
            )
        target_spec = specs.get(edge.target)
        if target_spec is not None:
            inputs = input_ports(target_spec)
            if edge.target_port not in inputs:
                why = (
                    "a trigger has no input ports"
                    if target_spec.kind == "trigger"
                    else f"its inputs are {port_list(inputs)}"
                )
                sink.add(
                    "unknown_port",
                    f"node {edge.target!r} has no input port {edge.target_port!r}; {why}",
                    edge_id=edge.id,
                    node_id=edge.target,
                )

        adjacency[edge.source].append(edge.target)
        incoming_count[edge.target] += 1


def port_list(ports: Iterable[str]) -> str:
    """Port names for a message (``'out', 'error'`` or ``(none)``)."""
    names = [repr(p) for p in ports]
    return ", ".join(names) if names else "(none)"


def reachable(start: str, adjacency: Mapping[str, list[str]]) -> set[str]:
    """Every node reachable from ``start`` along ``adjacency`` (``start`` included)."""
    reached = {start}
    stack = [start]
    while stack:
        for target in adjacency[stack.pop()]:
            if target not in reached:
                reached.add(target)
                stack.append(target)
    return reached


def cyclic_components(order: list[str], adjacency: Mapping[str, list[str]]) -> list[list[str]]:
    """Strongly connected components that contain a cycle (iterative Tarjan).

    Components come in order of their first node in ``order``; the nodes of each
    component keep ``order`` too.
    """
    position = {node_id: i for i, node_id in enumerate(order)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0

    for root in order:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node_id, child = work[-1]
            if child == 0:
                index[node_id] = low[node_id] = counter
                counter += 1
                stack.append(node_id)
                on_stack.add(node_id)
            targets = adjacency[node_id]
            if child < len(targets):
                work[-1] = (node_id, child + 1)
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node_id] = min(low[node_id], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node_id])
            if low[node_id] == index[node_id]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node_id:
                        break
                if len(component) > 1 or node_id in adjacency[node_id]:
                    found.append(sorted(component, key=position.__getitem__))
    found.sort(key=lambda component: position[component[0]])
    return found
