"""Compile a diagram into a workflow graph, with diagnostics.

:func:`compile_diagram` checks a :class:`~designer_schema.diagram.Diagram` against a
:class:`~designer_schema.catalog.Catalog` and returns ``(graph, diagnostics)``. It never
raises on a well-typed diagram: every problem becomes a :class:`Diagnostic`. ``graph`` is
``None`` when any diagnostic has severity ``error``; warnings never block publishing.

Rules and their diagnostic codes (all ``error``):

Nodes

- ``invalid_node_id``: a node whose id is empty (steps are named by their ids in runs,
  expressions and the API; the node is otherwise ignored).
- ``duplicate_node_id``: a node id already used by an earlier node (reported on the later
  node; the later node is otherwise ignored).
- ``unknown_node_type``: ``catalog.get(node.type)`` returns ``None``. The node's config
  and ports are not checked.
- ``missing_config``: a field listed in the config schema's ``required`` is absent,
  ``None`` or ``""`` (``field`` = the field name).
- ``unbound_reference``: a field named in the node's ``unbound`` (a credential or called
  workflow an import could not bind) is absent, ``None`` or ``""`` (``field`` = the field
  name); it blocks publishing until the field holds a value.
- ``invalid_config``: a field named in the node's ``unparsed`` (JSON text typed in the
  designer that does not parse; the message gives its line, column and reason).
  Also: a top-level literal value whose JSON type does not match the
  schema property's ``type`` (``string``, ``number``, ``integer``, ``boolean``, ``object``,
  ``array``, ``null``, or a list of these) or is not in its ``enum``. Expressions are
  exempt, and so is ``None`` in a field that is not required (an unset optional field).
  Also: a config that is not JSON-encodable, a ``dynamic_outputs`` field that is not a
  literal list of distinct non-empty port names, an expression path used twice, an
  ordered field list (``"x-ordered-fields"``) with an unnamed entry or a name used twice,
  and bad reserved keys (below).
- ``expression_syntax``: ``ExpressionChecker.check`` returned a message for an
  expression (that message becomes the diagnostic's), or the expression is empty.

Expressions: one marker, a leading ``=``

- In a field listed in the node type's ``expression_fields``, a string starting with ``=``
  is a JSONata expression; the rest of the string is its source. Dicts and lists inside
  such a field are searched too, so ``{"mapping": {"total": "=a + b"}}`` has an expression
  at ``mapping.total``. Paths join dict keys with ``.`` and list indexes as numbers
  (``mapping.total``, ``headers.X-Token``, ``items.0``).
- Escape: a string starting with ``==`` in an expression field is the literal string with
  its first ``=`` removed: ``"==5"`` means the text ``=5``.
- A field whose config-schema property has ``"x-always-expression": true`` (an If's
  condition) is always an expression: ``total > 100`` and ``=total > 100`` mean the same.
- Outside ``expression_fields`` every string is literal, ``=`` and ``==`` included, and is
  kept exactly as written.
- In the compiled :class:`~designer_schema.graph.Step`, ``config`` is the whole config with
  each expression leaf replaced by ``None`` (and escapes resolved); ``expressions`` maps
  each leaf's path to its source.

Reserved config keys, read by the engine and not checked against the config schema
(errors are ``invalid_config`` with ``field`` set, e.g. ``retry.max_attempts``). They are
always literal and stay in ``Step.config`` as written:

- ``retry``: an object with :class:`~designer_schema.graph.RetryPolicy` fields
  (``max_attempts`` >= 1, intervals >= 0, ``backoff_coefficient`` >= 1,
  ``max_interval`` >= ``initial_interval``, ``jitter`` in [0, 1]).
- ``timeout``: seconds per attempt, a number > 0 (or ``null``).
- ``join``: an object with :class:`~designer_schema.graph.JoinSpec` fields; ``n_of_m``
  needs 1 <= ``count`` <= number of incoming edges. A node type with ``config_join`` (the
  Join node) takes its join from its own ``mode`` and ``count`` fields instead (count
  defaults to 1); a ``count`` above the incoming edges is allowed there: the join fires
  with what arrived once every branch is resolved.
- ``on_error``: ``"fail"`` (default), ``"error_port"`` (adds the ``error`` output port) or
  ``"continue"`` (a failure continues on the regular output ports).

Ports

- Output ports: the node type's ``outputs``; then, when ``dynamic_outputs`` names a config
  field, the strings in that field's list (Switch cases); then ``error`` when the node's
  config has ``"on_error": "error_port"`` or its node type has ``error_port``.
- Input ports: the node type's ``inputs``; trigger nodes have none, whatever the spec
  says, so an edge into a trigger is an ``unknown_port``.

Edges

- ``dangling_edge``: the source or target node does not exist.
- ``unknown_port``: ``source_port`` is not an output port of the source node, or
  ``target_port`` is not an input port of the target node.
- ``duplicate_edge``: an edge id used twice, or a second edge with the same source,
  source port, target and target port.

- ``note_edge``: an edge from or to a sticky note (notes take no edges).

Warnings (never block publishing): ``unknown_config_key``, ``ignored_setting``,
``ignored_step`` and ``unanswered_branch``, for what a run would silently ignore or a
caller would silently miss (:mod:`designer_schema.ignored`).

Sticky notes (``type`` = :data:`~designer_schema.diagram.NOTE_TYPE`) are comments: they are
not steps, so they are never unreachable, never checked against the catalog, and adding,
editing or moving one leaves the content hash as it was.

Graph

- ``no_trigger``: no node of kind ``trigger``.
- ``multiple_triggers``: reported on each trigger after the first.
- ``unreachable_node``: a non-trigger node that cannot be reached from the trigger along
  edges (an error, so it blocks publishing; not reported when there is no trigger).
- ``cycle``: a directed cycle, self-loops included; reported once per node in each cycle
  (each strongly connected component), the message names all its nodes. Loops will come
  as explicit loop nodes.

Data flow (only when an :class:`~designer_schema.dataflow.ExpressionReader` is given):
every path an expression reads is checked against the schemas of the data it reads
(:mod:`designer_schema.dataflow`): ``unknown_field``, ``wrong_type`` and ``unknown_step``
are errors; ``not_upstream`` and ``list_value`` are warnings. They come after the
graph-wide checks.

Node-type versions: each step pins the version of the spec the catalog returned
(``Step.type_version`` = ``NodeTypeSpec.version``, the latest), so a published graph keeps
running that version's behaviour after a newer version is installed.

Building the graph (only when there is no error): ``trigger`` is the trigger node's id,
``steps`` follow diagram node order, ``transitions`` follow edge order, and
``content_hash`` is :func:`~designer_schema.graph.canonical_hash`. Positions, the
viewport and edge ids are not part of the graph, so moving nodes around or renaming edges
keeps the hash; labels and config are, so changing them changes it.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from designer_schema.catalog import Catalog, ExpressionChecker, NodeTypeSpec
from designer_schema.config_expressions import (
    ALWAYS_EXPRESSION,
    ESCAPED_MARKER,
    EXPRESSION_MARKER,
)
from designer_schema.dataflow import DATAFLOW_CODES, DataFlow, ExpressionReader
from designer_schema.diagnostic_sink import DiagnosticSink
from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import NOTE_TYPE, Diagram, Node
from designer_schema.graph import JoinSpec, Step, Transition, WorkflowGraph, canonical_hash
from designer_schema.graph_checks import check_edges, cyclic_components, reachable
from designer_schema.ignored import (
    IGNORED_CODES,
    check_answered_branches,
    check_node_keys,
    check_trigger_needs,
)
from designer_schema.node_compiler import compile_node
from designer_schema.step_options import RESERVED_CONFIG_KEYS

__all__ = [
    "ALWAYS_EXPRESSION",
    "DIAGNOSTIC_CODES",
    "ESCAPED_MARKER",
    "EXPRESSION_MARKER",
    "RESERVED_CONFIG_KEYS",
    "compile_diagram",
]

DIAGNOSTIC_CODES: Final = (
    "invalid_node_id",
    "duplicate_node_id",
    "unknown_node_type",
    "missing_config",
    "unbound_reference",
    "invalid_config",
    "expression_syntax",
    "dangling_edge",
    "unknown_port",
    "duplicate_edge",
    "note_edge",
    "no_trigger",
    "multiple_triggers",
    "unreachable_node",
    "cycle",
    *DATAFLOW_CODES,
    *IGNORED_CODES,
)
"""Every code :func:`compile_diagram` emits (the warnings of :mod:`designer_schema.ignored`
last)."""


def compile_diagram(
    diagram: Diagram,
    catalog: Catalog,
    expressions: ExpressionChecker,
    reader: ExpressionReader | None = None,
    trigger_input: dict[str, Any] | None = None,
) -> tuple[WorkflowGraph | None, list[Diagnostic]]:
    """Compile ``diagram`` into a :class:`WorkflowGraph`.

    ``catalog`` resolves node types; ``expressions`` checks the syntax of each expression
    (source without the leading ``=``); ``reader``, when given, tells which paths each
    expression reads, and they are checked against the upstream output schemas (with
    ``trigger_input`` as the run input's schema when given: see
    :class:`~designer_schema.dataflow.DataFlow`). Returns
    ``(graph, diagnostics)``: ``graph`` is ``None`` when any diagnostic is an error.
    Diagnostics come in a stable order (nodes in diagram order, then edges, then
    graph-wide checks, then data flow). Never raises for a diagram whose
    fields have their declared types; see the module docstring for the rules and codes.
    """
    sink = DiagnosticSink()

    nodes: dict[str, Node] = {}
    specs: dict[str, NodeTypeSpec] = {}
    steps: dict[str, Step] = {}
    join_fields: dict[str, JoinSpec] = {}
    notes: set[str] = set()
    for node in diagram.nodes:
        if not node.id:
            sink.add(
                "invalid_node_id",
                f"a node of type {node.type!r} has an empty id: every node needs an id",
                node_id=None,
            )
            continue
        if node.id in nodes or node.id in notes:
            sink.add(
                "duplicate_node_id",
                f"node id {node.id!r} is used by more than one node",
                node_id=node.id,
            )
            continue
        if node.type == NOTE_TYPE:
            notes.add(node.id)
            continue
        nodes[node.id] = node
        spec = catalog.get(node.type)
        if spec is None:
            sink.add(
                "unknown_node_type",
                f"unknown node type {node.type!r}",
                node_id=node.id,
            )
            continue
        specs[node.id] = spec
        steps[node.id] = compile_node(node, spec, expressions, sink)
        check_node_keys(node, spec, RESERVED_CONFIG_KEYS, sink.add)
        if "join" in node.config and node.config["join"] is not None:
            join_fields[node.id] = steps[node.id].join

    adjacency: dict[str, list[str]] = {node_id: [] for node_id in nodes}
    incoming_count: dict[str, int] = dict.fromkeys(nodes, 0)
    note_edges = {e.id for e in diagram.edges if e.source in notes or e.target in notes}
    for edge_id in sorted(note_edges):
        sink.add("note_edge", "sticky notes cannot be connected", edge_id=edge_id)
    wired = Diagram(
        nodes=diagram.nodes,
        edges=[e for e in diagram.edges if e.id not in note_edges],
        viewport=diagram.viewport,
        schema_version=diagram.schema_version,
    )
    check_edges(wired, nodes, specs, steps, adjacency, incoming_count, sink)

    for node_id, join in join_fields.items():
        if join.mode == "n_of_m" and join.count > incoming_count[node_id]:
            sink.add(
                "invalid_config",
                f"join waits for {join.count} arrivals but the node has "
                f"{incoming_count[node_id]} incoming edge(s)",
                node_id=node_id,
                field="join.count",
            )

    triggers = [node_id for node_id, spec in specs.items() if spec.kind == "trigger"]
    if not triggers:
        sink.add("no_trigger", "the workflow has no trigger node; add one to start runs")
    for extra in triggers[1:]:
        sink.add(
            "multiple_triggers",
            f"only one trigger per workflow is allowed; {triggers[0]!r} is already the trigger",
            node_id=extra,
        )

    if triggers:
        check_trigger_needs(nodes, specs, triggers[0], sink.add)
        check_answered_branches(
            nodes,
            specs,
            {node_id: step.outputs for node_id, step in steps.items()},
            [(e.source, e.source_port, e.target) for e in wired.edges if e.source in nodes],
            triggers[0],
            sink.add,
        )
        reached = reachable(triggers[0], adjacency)
        trigger_set = set(triggers)
        for node_id in nodes:
            if node_id not in reached and node_id not in trigger_set:
                sink.add(
                    "unreachable_node",
                    f"node {node_id!r} cannot be reached from the trigger {triggers[0]!r}",
                    node_id=node_id,
                )

    for component in cyclic_components(list(nodes), adjacency):
        names = ", ".join(repr(n) for n in component)
        for node_id in component:
            sink.add(
                "cycle",
                f"nodes {names} form a cycle; workflows must be acyclic "
                "(use a loop node to repeat steps)",
                node_id=node_id,
            )

    if reader is not None:
        flow = DataFlow(nodes, specs, list(wired.edges), reader, trigger_input)
        for node_id, step in steps.items():
            sink.items.extend(flow.check(node_id, step.expressions))

    if sink.has_errors:
        return None, sink.items

    graph = WorkflowGraph(
        trigger=triggers[0],
        steps=[steps[node.id] for node in diagram.nodes if node.id in steps],
        transitions=[
            Transition(
                source=edge.source,
                target=edge.target,
                source_port=edge.source_port,
                target_port=edge.target_port,
            )
            for edge in diagram.edges
        ],
    )
    graph = msgspec.structs.replace(graph, content_hash=canonical_hash(graph))
    return graph, sink.items
