"""Compile a diagram into a workflow graph, with diagnostics.

:func:`compile_diagram` checks a :class:`~designer_schema.diagram.Diagram` against a
:class:`~designer_schema.catalog.Catalog` and returns ``(graph, diagnostics)``. It never
raises on a well-typed diagram: every problem becomes a :class:`Diagnostic`. ``graph`` is
``None`` when any diagnostic has severity ``error``; warnings never block publishing.

Rules and their diagnostic codes (all ``error``):

Nodes

- ``duplicate_node_id``: a node id already used by an earlier node (reported on the later
  node; the later node is otherwise ignored).
- ``unknown_node_type``: ``catalog.get(node.type)`` returns ``None``. The node's config
  and ports are not checked.
- ``missing_config``: a field listed in the config schema's ``required`` is absent,
  ``None`` or ``""`` (``field`` = the field name).
- ``invalid_config``: a top-level literal value whose JSON type does not match the
  schema property's ``type`` (``string``, ``number``, ``integer``, ``boolean``, ``object``,
  ``array``, ``null``, or a list of these) or is not in its ``enum``. Expressions are
  exempt, and so is ``None`` in a field that is not required (an unset optional field).
  Also: a config that is not JSON-encodable, a ``dynamic_outputs`` field that is not a
  literal list of distinct non-empty port names, an expression path used twice, and bad
  reserved keys (below).
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

Warnings (never block publishing): ``unknown_config_key``, ``ignored_setting`` and
``ignored_step``, for what a run would silently ignore (:mod:`designer_schema.ignored`).

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

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

from designer_schema.catalog import Catalog, ExpressionChecker, NodeTypeSpec
from designer_schema.diagnostics import Diagnostic, Severity
from designer_schema.diagram import NOTE_TYPE, Diagram, Node
from designer_schema.graph import (
    ERROR_PORT,
    JoinMode,
    JoinSpec,
    OnError,
    RetryPolicy,
    Step,
    Transition,
    WorkflowGraph,
    canonical_hash,
)
from designer_schema.ignored import IGNORED_CODES, check_node_keys, check_trigger_needs

__all__ = [
    "ALWAYS_EXPRESSION",
    "DIAGNOSTIC_CODES",
    "ESCAPED_MARKER",
    "EXPRESSION_MARKER",
    "RESERVED_CONFIG_KEYS",
    "compile_diagram",
]

EXPRESSION_MARKER: Final = "="
ALWAYS_EXPRESSION: Final = "x-always-expression"
"""Config-schema flag: the field is always an expression; the leading ``=`` is optional."""
"""A string starting with this, in an expression field, is a JSONata expression."""

ESCAPED_MARKER: Final = "=="
"""A string starting with this, in an expression field, is a literal starting with ``=``."""

RESERVED_CONFIG_KEYS: Final = frozenset({"retry", "timeout", "join", "on_error"})
"""Config keys read by the engine for every node type (not part of config schemas)."""

DIAGNOSTIC_CODES: Final = (
    "duplicate_node_id",
    "unknown_node_type",
    "missing_config",
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
    *IGNORED_CODES,
)
"""Every code :func:`compile_diagram` emits (the warnings of :mod:`designer_schema.ignored`
last)."""

_MAX_DEPTH: Final = 64
_JSON_TYPES: Final = frozenset(
    {"string", "number", "integer", "boolean", "object", "array", "null"}
)
_ON_ERROR_VALUES: Final[tuple[OnError, ...]] = ("fail", "error_port", "continue")
_JOIN_MODES: Final[tuple[JoinMode, ...]] = ("all", "first", "n_of_m")


class _Sink:
    """Collects diagnostics in emission order."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def add(
        self,
        code: str,
        message: str,
        *,
        node_id: str | None = None,
        edge_id: str | None = None,
        field: str | None = None,
        severity: Severity = "error",
    ) -> None:
        self.items.append(
            Diagnostic(
                severity=severity,
                code=code,
                message=message,
                node_id=node_id,
                edge_id=edge_id,
                field=field,
            )
        )

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.items)


def compile_diagram(
    diagram: Diagram, catalog: Catalog, expressions: ExpressionChecker
) -> tuple[WorkflowGraph | None, list[Diagnostic]]:
    """Compile ``diagram`` into a :class:`WorkflowGraph`.

    ``catalog`` resolves node types; ``expressions`` checks the syntax of each expression
    (source without the leading ``=``). Returns ``(graph, diagnostics)``: ``graph`` is
    ``None`` when any diagnostic is an error. Diagnostics come in a stable order (nodes in
    diagram order, then edges, then graph-wide checks). Never raises for a diagram whose
    fields have their declared types; see the module docstring for the rules and codes.
    """
    sink = _Sink()

    nodes: dict[str, Node] = {}
    specs: dict[str, NodeTypeSpec] = {}
    steps: dict[str, Step] = {}
    join_fields: dict[str, JoinSpec] = {}
    notes: set[str] = set()
    for node in diagram.nodes:
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
        steps[node.id] = _compile_node(node, spec, expressions, sink)
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
    _check_edges(wired, nodes, specs, steps, adjacency, incoming_count, sink)

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
        reached = _reachable(triggers[0], adjacency)
        trigger_set = set(triggers)
        for node_id in nodes:
            if node_id not in reached and node_id not in trigger_set:
                sink.add(
                    "unreachable_node",
                    f"node {node_id!r} cannot be reached from the trigger {triggers[0]!r}",
                    node_id=node_id,
                )

    for component in _cyclic_components(list(nodes), adjacency):
        names = ", ".join(repr(n) for n in component)
        for node_id in component:
            sink.add(
                "cycle",
                f"nodes {names} form a cycle; workflows must be acyclic "
                "(use a loop node to repeat steps)",
                node_id=node_id,
            )

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


# ---------------------------------------------------------------------------------------
# nodes


def _compile_node(node: Node, spec: NodeTypeSpec, checker: ExpressionChecker, sink: _Sink) -> Step:
    """Check one node's config and build its step (even when errors were found)."""
    try:
        msgspec.json.encode(node.config)
    except (TypeError, ValueError, OverflowError) as exc:
        sink.add(
            "invalid_config",
            f"config is not JSON-encodable: {exc}",
            node_id=node.id,
        )
        # Keep going with a config we can at least walk; the graph will not be built.

    properties = _schema_properties(spec.config_schema)
    required = _schema_required(spec.config_schema)
    expression_fields = set(spec.expression_fields)

    missing: set[str] = set()
    for name in required:
        if name in RESERVED_CONFIG_KEYS:
            continue
        value = node.config.get(name)
        if value is None or (isinstance(value, str) and value == ""):
            missing.add(name)
            prop = properties.get(name)
            title = prop.get("title") if isinstance(prop, Mapping) else None
            sink.add(
                "missing_config",
                f"{title or name} is required" + (f" ({name})" if title else ""),
                node_id=node.id,
                field=name,
            )

    config: dict[str, Any] = {}
    expressions: dict[str, str] = {}
    for key, value in node.config.items():
        name = str(key)
        if name in RESERVED_CONFIG_KEYS:
            config[name] = value
            continue
        if name in expression_fields:
            schema_of_field = properties.get(name)
            if (
                isinstance(schema_of_field, Mapping)
                and schema_of_field.get(ALWAYS_EXPRESSION)
                and isinstance(value, str)
                and value
                and not value.startswith(EXPRESSION_MARKER)
            ):
                value = EXPRESSION_MARKER + value
            literal = _compile_value(value, name, 0, node.id, checker, expressions, sink)
        else:
            literal = value
        config[name] = literal
        # Expressions are checked at run time; None is an unset optional field (a required
        # one was reported as missing_config above).
        if name in expressions or literal is None or name in missing:
            continue
        schema = properties.get(name)
        if isinstance(schema, Mapping):
            _check_literal(literal, schema, node.id, name, sink)

    outputs = _output_ports(node, spec, expressions, sink)
    on_error = _parse_on_error(node, sink)
    if spec.error_port:
        on_error = "error_port"
    if on_error == "error_port" and ERROR_PORT not in outputs:
        outputs = (*outputs, ERROR_PORT)

    return Step(
        id=node.id,
        type=node.type,
        kind=spec.kind,
        label=node.label,
        config=config,
        expressions=expressions,
        outputs=outputs,
        join=_config_join(config) if spec.config_join else _parse_join(node, sink),
        retry=_parse_retry(node, sink),
        timeout=_parse_timeout(node, sink),
        on_error=on_error,
        type_version=spec.version,
    )


def _compile_value(
    value: Any,
    path: str,
    depth: int,
    node_id: str,
    checker: ExpressionChecker,
    expressions: dict[str, str],
    sink: _Sink,
) -> Any:
    """Return ``value`` with expression leaves replaced by ``None``; record the sources."""
    if depth > _MAX_DEPTH:
        sink.add(
            "invalid_config",
            f"value is nested more than {_MAX_DEPTH} levels deep",
            node_id=node_id,
            field=path,
        )
        return None
    if isinstance(value, str):
        if value.startswith(ESCAPED_MARKER):
            return value[1:]
        if not value.startswith(EXPRESSION_MARKER):
            return value
        source = value[len(EXPRESSION_MARKER) :]
        if path in expressions:
            sink.add(
                "invalid_config",
                f"two expressions share the path {path!r}; rename a key",
                node_id=node_id,
                field=path,
            )
        expressions[path] = source
        message = _check_expression(checker, source)
        if message is not None:
            sink.add("expression_syntax", message, node_id=node_id, field=path)
        return None
    if isinstance(value, Mapping):
        return {
            str(k): _compile_value(v, f"{path}.{k}", depth + 1, node_id, checker, expressions, sink)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            _compile_value(v, f"{path}.{i}", depth + 1, node_id, checker, expressions, sink)
            for i, v in enumerate(value)
        ]
    return value


def _check_expression(checker: ExpressionChecker, source: str) -> str | None:
    if not source.strip():
        return "empty expression: write something after '='"
    try:
        return checker.check(source)
    except Exception as exc:  # a checker that raises must not break compilation
        return f"expression could not be checked: {exc}"


def _schema_properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def _schema_required(schema: Mapping[str, Any]) -> list[str]:
    required = schema.get("required") if isinstance(schema, Mapping) else None
    if not isinstance(required, list | tuple):
        return []
    return [name for name in required if isinstance(name, str)]


def _json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _matches_type(value: Any, expected: str) -> bool:
    actual = _json_type_of(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer":
        return actual == "integer" or (
            actual == "number" and math.isfinite(value) and float(value).is_integer()
        )
    return actual == expected


def _check_literal(
    value: Any, schema: Mapping[str, Any], node_id: str, field: str, sink: _Sink
) -> None:
    declared = schema.get("type")
    expected: list[str]
    if isinstance(declared, str):
        expected = [declared]
    elif isinstance(declared, list | tuple):
        expected = [t for t in declared if isinstance(t, str)]
    else:
        expected = []
    expected = [t for t in expected if t in _JSON_TYPES]
    if expected and not any(_matches_type(value, t) for t in expected):
        sink.add(
            "invalid_config",
            f"expected {' or '.join(expected)}, got {_json_type_of(value)}",
            node_id=node_id,
            field=field,
        )
        return
    enum = schema.get("enum")
    if isinstance(enum, list | tuple) and not any(_json_equal(value, e) for e in enum):
        choices = ", ".join(_short(e) for e in enum)
        sink.add(
            "invalid_config",
            f"{_short(value)} is not one of {choices}",
            node_id=node_id,
            field=field,
        )


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON sees it (``True`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    try:
        return bool(a == b)
    except Exception:  # exotic values with a raising __eq__
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _output_ports(
    node: Node, spec: NodeTypeSpec, expressions: Mapping[str, str], sink: _Sink
) -> tuple[str, ...]:
    outputs = list(spec.outputs)
    field = spec.dynamic_outputs
    if field is None:
        return tuple(outputs)
    value = node.config.get(field)
    if value is None:
        return tuple(outputs)
    if field in expressions or not isinstance(value, list | tuple):
        sink.add(
            "invalid_config",
            "must be a literal list of output port names",
            node_id=node.id,
            field=field,
        )
        return tuple(outputs)
    taken = set(outputs)
    for index, port in enumerate(value):
        where = f"{field}.{index}"
        if not isinstance(port, str) or not port:
            sink.add(
                "invalid_config",
                "an output port name must be a non-empty string",
                node_id=node.id,
                field=where,
            )
        elif port in taken or port == ERROR_PORT:
            sink.add(
                "invalid_config",
                f"output port {port!r} is defined more than once",
                node_id=node.id,
                field=where,
            )
        else:
            taken.add(port)
            outputs.append(port)
    return tuple(outputs)


# ---------------------------------------------------------------------------------------
# reserved keys


def _struct_field(
    node: Node,
    key: str,
    struct_type: type[RetryPolicy] | type[JoinSpec],
    sink: _Sink,
) -> dict[str, Any] | None:
    """Common checks of an object-valued reserved key; returns its fields when usable."""
    value = node.config.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        sink.add(
            "invalid_config",
            f"{key} must be an object, got {_json_type_of(value)}",
            node_id=node.id,
            field=key,
        )
        return None
    known = set(struct_type.__struct_fields__)
    fields: dict[str, Any] = {}
    for name, item in value.items():
        if name in known:
            fields[str(name)] = item
        else:
            sink.add(
                "invalid_config",
                f"unknown {key} setting {name!r}; expected one of {', '.join(sorted(known))}",
                node_id=node.id,
                field=f"{key}.{name}",
            )
    return fields


def _convert_error(exc: msgspec.ValidationError, node: Node, key: str, sink: _Sink) -> None:
    text = str(exc)
    message, sep, where = text.partition(" - at `$")
    field = key
    if sep:
        suffix = where.rstrip("`").replace("[", ".").replace("]", "")
        field = f"{key}{suffix}"
    sink.add("invalid_config", message, node_id=node.id, field=field)


def _parse_retry(node: Node, sink: _Sink) -> RetryPolicy:
    fields = _struct_field(node, "retry", RetryPolicy, sink)
    if fields is None:
        return RetryPolicy()
    try:
        policy = msgspec.convert(fields, RetryPolicy)
    except msgspec.ValidationError as exc:
        _convert_error(exc, node, "retry", sink)
        return RetryPolicy()
    problems: list[tuple[str, str]] = []
    if policy.max_attempts < 1:
        problems.append(("max_attempts", "must be at least 1"))
    for name in ("initial_interval", "max_interval", "backoff_coefficient", "jitter"):
        number = getattr(policy, name)
        if not math.isfinite(number):
            problems.append((name, "must be a finite number"))
    if policy.initial_interval < 0:
        problems.append(("initial_interval", "must not be negative"))
    if policy.backoff_coefficient < 1:
        problems.append(("backoff_coefficient", "must be at least 1"))
    if policy.max_interval < policy.initial_interval:
        problems.append(("max_interval", "must be at least initial_interval"))
    if not 0 <= policy.jitter <= 1:
        problems.append(("jitter", "must be between 0 and 1"))
    for name, message in problems:
        sink.add("invalid_config", message, node_id=node.id, field=f"retry.{name}")
    return RetryPolicy() if problems else policy


def _parse_join(node: Node, sink: _Sink) -> JoinSpec:
    fields = _struct_field(node, "join", JoinSpec, sink)
    if fields is None:
        return JoinSpec()
    try:
        join = msgspec.convert(fields, JoinSpec)
    except msgspec.ValidationError as exc:
        _convert_error(exc, node, "join", sink)
        return JoinSpec()
    if join.count < 0:
        sink.add("invalid_config", "must not be negative", node_id=node.id, field="join.count")
        return JoinSpec()
    if join.mode == "n_of_m" and join.count < 1:
        sink.add(
            "invalid_config",
            "n_of_m needs a count of at least 1",
            node_id=node.id,
            field="join.count",
        )
        return JoinSpec()
    return join


def _config_join(config: Mapping[str, Any]) -> JoinSpec:
    """The join of a node whose own ``mode``/``count`` fields say what it waits for (the
    Join node; ``NodeTypeSpec.config_join``): an unknown mode waits for all, a count that
    is not an integer counts 1 (the schema check has reported bad literals already)."""
    mode: JoinMode = "all"
    for known in _JOIN_MODES:
        if config.get("mode") == known:
            mode = known
    count = config.get("count") or 1
    usable = isinstance(count, int) and not isinstance(count, bool)
    return JoinSpec(mode=mode, count=count if usable else 1)


def _parse_timeout(node: Node, sink: _Sink) -> float | None:
    value = node.config.get("timeout")
    if value is None:
        return None
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = None
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        sink.add(
            "invalid_config",
            f"timeout must be a positive number of seconds, got {_short(value)}",
            node_id=node.id,
            field="timeout",
        )
        return None
    return seconds


def _parse_on_error(node: Node, sink: _Sink) -> OnError:
    value = node.config.get("on_error")
    if value is None:
        return "fail"
    for allowed in _ON_ERROR_VALUES:
        if isinstance(value, str) and value == allowed:
            return allowed
    sink.add(
        "invalid_config",
        f"on_error must be one of {', '.join(_ON_ERROR_VALUES)}, got {_short(value)}",
        node_id=node.id,
        field="on_error",
    )
    return "fail"


# ---------------------------------------------------------------------------------------
# edges and graph shape


def _input_ports(spec: NodeTypeSpec) -> tuple[str, ...]:
    return () if spec.kind == "trigger" else spec.inputs


def _check_edges(
    diagram: Diagram,
    nodes: Mapping[str, Node],
    specs: Mapping[str, NodeTypeSpec],
    steps: Mapping[str, Step],
    adjacency: dict[str, list[str]],
    incoming_count: dict[str, int],
    sink: _Sink,
) -> None:
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
                f"its outputs are {_port_list(source_step.outputs)}",
                edge_id=edge.id,
                node_id=edge.source,
            )
        target_spec = specs.get(edge.target)
        if target_spec is not None:
            inputs = _input_ports(target_spec)
            if edge.target_port not in inputs:
                why = (
                    "a trigger has no input ports"
                    if target_spec.kind == "trigger"
                    else f"its inputs are {_port_list(inputs)}"
                )
                sink.add(
                    "unknown_port",
                    f"node {edge.target!r} has no input port {edge.target_port!r}; {why}",
                    edge_id=edge.id,
                    node_id=edge.target,
                )

        adjacency[edge.source].append(edge.target)
        incoming_count[edge.target] += 1


def _port_list(ports: Iterable[str]) -> str:
    names = [repr(p) for p in ports]
    return ", ".join(names) if names else "(none)"


def _reachable(start: str, adjacency: Mapping[str, list[str]]) -> set[str]:
    reached = {start}
    stack = [start]
    while stack:
        for target in adjacency[stack.pop()]:
            if target not in reached:
                reached.add(target)
                stack.append(target)
    return reached


def _cyclic_components(order: list[str], adjacency: Mapping[str, list[str]]) -> list[list[str]]:
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
