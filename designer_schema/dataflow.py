"""Typed data flow: the schema of every step's input and output, and the paths that cannot exist.

Each node type declares the JSON Schema of its output (``NodeTypeSpec.output_schema``).
:class:`DataFlow` walks the diagram from the trigger in topological order and works out,
for every node, the schema of its input (what ``$`` and bare paths read) and of its
output, then checks every path an expression reads against the schema it reads from
(:mod:`designer_schema.schema_paths` has the reading rules). The expression language
stays outside this package: an :class:`ExpressionReader` (implemented with jsonata-python
in ``backend.engine.expression_paths``) tells which paths an expression reads.

Output-schema keywords that depend on the node's config or input:

- ``"x-same-as-input": true``: the output is the step input (If, Switch, Delay, Join).
- ``"x-fields-from": "<field>"``: the output is an object with one property per entry of
  that ordered field list (the Set node's ``mapping``, :mod:`designer_schema.ordered_fields`),
  in its order; a literal value gives its own type, an
  expression the type of its result when the reader can tell (a path, ``&``, arithmetic).
- ``"x-merge-input-if": "<field>"``: with that boolean config field true, the input
  object's fields are part of the output too (Set's "Keep input fields").
- ``"x-schema-from": "<field>"``: the whole output schema is that config field when it
  holds a JSON Schema object (the Manual trigger's ``input_schema``: the run input a
  For each or Sub-workflow caller passes), else the declared one. Such a trigger *types
  the run input*: a :class:`DataFlow` given ``trigger_input`` uses that schema as the
  trigger's output instead (what the workflow's callers send, inferred from them or
  checked at a caller's publish: backend/services/workflows/child_contracts.py).
- ``"x-property-schemas": {"<property>": "<field>"}``: the property's schema is taken from
  that config field when it holds a JSON Schema object (the webhook's ``body_schema``).
- ``"x-properties-if": {"<property>": "<field>" | "!<field>"}``: the property is in the
  output only when that config field is set (not empty, not false), or with ``!`` only
  when it is not; kept, it is required (Aggregate: ``groups`` with *Group by*, else
  ``result``; the webhook's request fields, or with ``cloudevents`` the event's).

Inputs: one incoming edge gives the source's output; several give either one of them or
the object keyed by the arrived sources' ids (the engine's rule); a Join node
(``config_join``) always gets the keyed object. An ``error`` port and a node with
``on_error: continue`` give ``{"error": {...}, "input": <the failed step's input>}``.

Diagnostics (all on the node and the expression's field):

- ``unknown_field`` (error): the path names a field the schema does not list.
- ``wrong_type`` (error): the path reads a field of a string, number, boolean, null or a
  list of those ("list used as object").
- ``unknown_step`` (error): ``$steps.<id>`` names no step of the diagram.
- ``not_upstream`` (warning): ``$steps.<id>`` names a step that does not come before
  this one, so its output may not exist yet.
- ``list_value`` (warning): a list is joined into text with ``&`` or used in arithmetic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Final, Literal, Protocol

import msgspec

from designer_schema.catalog import Catalog, NodeTypeSpec
from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import NOTE_TYPE, Diagram, Edge, Node
from designer_schema.graph import ERROR_PORT
from designer_schema.ordered_fields import field_entries
from designer_schema.schema_paths import (
    ANYTHING,
    Missing,
    child_schema,
    is_list,
    union,
    value_schema,
)

__all__ = [
    "DATAFLOW_CODES",
    "INPUT_CODES",
    "RUN_SCHEMA",
    "DataFlow",
    "ExpressionFacts",
    "ExpressionReader",
    "PathUse",
    "declares_input",
]

PathRoot = Literal["input", "trigger", "steps", "run"]
PathUsage = Literal["value", "text", "number"]

DATAFLOW_CODES: Final = (
    "unknown_field",
    "wrong_type",
    "unknown_step",
    "not_upstream",
    "list_value",
)
"""Every code :meth:`DataFlow.check` emits."""

INPUT_CODES: Final = ("unknown_field", "wrong_type")
"""The codes of a path that the data read does not have (what a caller's call lacks)."""

RUN_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "The run id"},
        "workflow_id": {"type": "string"},
        "version": {"type": "integer", "description": "The workflow version the run pins"},
    },
    "required": ["id", "workflow_id", "version"],
}
"""What ``$run`` holds."""

_ERROR_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "description": "The step's error: kind, message and details",
}
_ROOT_OWNER: Final[dict[str, str]] = {"input": "the input", "trigger": "$trigger", "run": "$run"}


class PathUse(msgspec.Struct, frozen=True):
    """One path an expression reads: from ``root`` (``input``: ``$`` or a bare name;
    ``trigger``, ``steps``, ``run``: the variables) through field ``names``; ``usage`` says
    whether its value is joined into text (``&``), used in arithmetic, or anything else."""

    root: PathRoot
    names: tuple[str, ...]
    usage: PathUsage = "value"


class ExpressionFacts(msgspec.Struct, frozen=True):
    """What a reader found in one expression: the ``paths`` it reads; ``result_type``, the
    JSON type of its value when the outermost operator fixes it (``&`` gives ``string``);
    ``result_path`` when the whole expression is one path."""

    paths: tuple[PathUse, ...] = ()
    result_type: str | None = None
    result_path: PathUse | None = None


class ExpressionReader(Protocol):
    """Reads the paths of an expression (source without the leading ``=``)."""

    def read(self, source: str) -> ExpressionFacts | None:
        """The facts of ``source``, or ``None`` when it does not parse."""
        ...


class DataFlow:
    """Input and output schemas of every node of a diagram, and the check of its paths.

    ``nodes`` and ``specs`` hold the steps (no sticky notes) by id; ``edges`` may include
    edges to unknown nodes (they are ignored). Nodes on a cycle get ``{}`` (anything).
    ``trigger_input``, when given, is the run input's schema: the output of a trigger
    whose output is the run input (``"x-schema-from"``); other triggers keep theirs."""

    def __init__(
        self,
        nodes: Mapping[str, Node],
        specs: Mapping[str, NodeTypeSpec],
        edges: list[Edge],
        reader: ExpressionReader,
        trigger_input: dict[str, Any] | None = None,
    ) -> None:
        self._nodes = nodes
        self._specs = specs
        self._reader = reader
        self._trigger_input = trigger_input
        self._incoming: dict[str, list[Edge]] = {node_id: [] for node_id in specs}
        outgoing: dict[str, list[str]] = {node_id: [] for node_id in specs}
        for edge in edges:
            if edge.source in specs and edge.target in specs:
                self._incoming[edge.target].append(edge)
                outgoing[edge.source].append(edge.target)
        self.trigger = next((n for n, s in specs.items() if s.kind == "trigger"), None)
        self._inputs: dict[str, dict[str, Any]] = {}
        self._outputs: dict[str, dict[str, Any]] = {}
        self._ancestors: dict[str, frozenset[str]] = {}
        waiting = {node_id: len(self._incoming[node_id]) for node_id in specs}
        ready = deque(node_id for node_id, count in waiting.items() if count == 0)
        while ready:
            node_id = ready.popleft()
            self._inputs[node_id] = self._input_of(node_id)
            self._outputs[node_id] = self._output_of(node_id)
            for target in outgoing[node_id]:
                waiting[target] -= 1
                if waiting[target] == 0:
                    ready.append(target)

    @classmethod
    def of_diagram(
        cls,
        diagram: Diagram,
        catalog: Catalog,
        reader: ExpressionReader,
        trigger_input: dict[str, Any] | None = None,
    ) -> DataFlow:
        """The data flow of ``diagram`` (first node of each id; unknown types skipped)."""
        nodes: dict[str, Node] = {}
        specs: dict[str, NodeTypeSpec] = {}
        for node in diagram.nodes:
            if node.type == NOTE_TYPE or node.id in nodes:
                continue
            spec = catalog.get(node.type)
            if spec is not None:
                nodes[node.id] = node
                specs[node.id] = spec
        return cls(nodes, specs, list(diagram.edges), reader, trigger_input)

    # ---------------------------------------------------------------- schemas

    def input_schema(self, node_id: str) -> dict[str, Any]:
        """Schema of the node's input (``$``); ``{}`` when unknown."""
        return self._inputs.get(node_id, ANYTHING)

    def output_schema(self, node_id: str) -> dict[str, Any]:
        """Schema of the node's output; ``{}`` when unknown."""
        return self._outputs.get(node_id, ANYTHING)

    def child_input(self, node_id: str) -> dict[str, Any] | None:
        """Schema of what each child run of a call node receives (its spec's config schema
        key ``"x-child-input"``, a schema whose parts may say ``"x-item-of": "<field>"``
        (an element of that field's list), ``"x-step-input": true`` (the step's input) or
        ``"x-field-or-input": "<field>"`` (that field's value, the step's input when it
        is empty)); ``None`` for a node that starts no child runs."""
        spec = self._specs.get(node_id)
        declared = (spec.config_schema or {}).get("x-child-input") if spec else None
        if not isinstance(declared, dict):
            return None
        return self._child_part(self._nodes[node_id], declared)

    def _child_part(self, node: Node, schema: dict[str, Any]) -> dict[str, Any]:
        if isinstance(schema.get("x-item-of"), str):
            items = self._field_schema(node, schema["x-item-of"]).get("items")
            return items if isinstance(items, dict) else ANYTHING
        if schema.get("x-step-input"):
            return self._inputs.get(node.id, ANYTHING)
        field = schema.get("x-field-or-input")
        if isinstance(field, str):
            if node.config.get(field) in (None, ""):
                return self._inputs.get(node.id, ANYTHING)
            return self._field_schema(node, field)
        properties = schema.get("properties")
        if isinstance(properties, dict):
            parts = {k: self._child_part(node, v) for k, v in properties.items()}
            return {**schema, "properties": parts}
        return schema

    def _field_schema(self, node: Node, field: str) -> dict[str, Any]:
        """The schema of a config field's value: an expression's result, or the literal's."""
        value = node.config.get(field)
        if isinstance(value, str) and value.startswith("=") and not value.startswith("=="):
            return self._result_schema(node.id, value[1:])
        return value_schema(value)

    def upstream(self, node_id: str) -> frozenset[str]:
        """Ids of the nodes with a path of edges to ``node_id`` (its ancestors)."""
        found = self._ancestors.get(node_id)
        if found is None:
            seen: set[str] = set()
            stack = [e.source for e in self._incoming.get(node_id, [])]
            while stack:
                current = stack.pop()
                if current not in seen:
                    seen.add(current)
                    stack.extend(e.source for e in self._incoming.get(current, []))
            seen.discard(node_id)
            found = self._ancestors[node_id] = frozenset(seen)
        return found

    def context(self, node_id: str) -> dict[str, dict[str, Any]]:
        """What an expression of ``node_id`` sees, by name: ``$`` (the input),
        ``$trigger``, ``$steps`` (an object of the upstream steps' outputs) and ``$run``."""
        upstream = self.upstream(node_id)
        steps = {
            "type": "object",
            "properties": {n: self.output_schema(n) for n in self._specs if n in upstream},
        }
        trigger = self.output_schema(self.trigger) if self.trigger else ANYTHING
        return {
            "$": self.input_schema(node_id),
            "$trigger": trigger,
            "$steps": steps,
            "$run": RUN_SCHEMA,
        }

    def _contribution(self, edge: Edge) -> dict[str, Any]:
        if edge.source_port == ERROR_PORT:
            return _failure(self.input_schema(edge.source))
        return self.output_schema(edge.source)

    def _input_of(self, node_id: str) -> dict[str, Any]:
        incoming = self._incoming[node_id]
        if not incoming:
            return ANYTHING
        by_source: dict[str, list[dict[str, Any]]] = {}
        for edge in incoming:
            by_source.setdefault(edge.source, []).append(self._contribution(edge))
        keyed = {"type": "object", "properties": {s: union(c) for s, c in by_source.items()}}
        if self._specs[node_id].config_join:
            return keyed
        if len(incoming) == 1:
            return by_source[incoming[0].source][0]
        return union([*(c for cs in by_source.values() for c in cs), keyed])

    def _output_of(self, node_id: str) -> dict[str, Any]:
        node, spec = self._nodes[node_id], self._specs[node_id]
        declared = spec.output_schema
        data = self._inputs[node_id]
        if declared.get("x-same-as-input"):
            output = data
        elif isinstance(declared.get("x-fields-from"), str):
            output = self._fields_from(node, declared, data)
        elif isinstance(declared.get("x-schema-from"), str):
            schema = node.config.get(declared["x-schema-from"])
            if self._trigger_input is not None and node_id == self.trigger:
                schema = self._trigger_input
            output = schema if isinstance(schema, dict) and schema else declared
        else:
            output = declared
            replaced = declared.get("x-property-schemas")
            if isinstance(replaced, dict):
                output = _with_property_schemas(declared, replaced, node.config)
            conditions = declared.get("x-properties-if")
            if isinstance(conditions, dict):
                output = _with_conditional_properties(output, conditions, node.config)
        if node.config.get("on_error") == "continue":
            output = union([output, _failure(data)])
        return output

    def _fields_from(
        self, node: Node, declared: Mapping[str, Any], data: dict[str, Any]
    ) -> dict[str, Any]:
        entries = field_entries(node.config.get(declared["x-fields-from"]))
        if entries is None:
            return {"type": "object"}
        properties: dict[str, Any] = {}
        for key, value, _path in entries:
            if isinstance(value, str) and value.startswith("=") and not value.startswith("=="):
                properties[str(key)] = self._result_schema(node.id, value[1:])
            else:
                literal = value[1:] if isinstance(value, str) and value.startswith("==") else value
                properties[str(key)] = value_schema(literal)
        output: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "required": list(properties),
        }
        merge = declared.get("x-merge-input-if")
        if isinstance(merge, str) and node.config.get(merge):
            kept = data.get("properties")
            closed = "anyOf" not in data and not data.get("additionalProperties")
            if isinstance(kept, dict) and closed:
                output["properties"] = {**kept, **properties}
            else:
                output["additionalProperties"] = True
        return output

    def _result_schema(self, node_id: str, source: str) -> dict[str, Any]:
        facts = self._read(source)
        if facts is None:
            return ANYTHING
        if facts.result_path is not None:
            found = self._resolve(node_id, facts.result_path)
            return ANYTHING if isinstance(found, Diagnostic) else found[0]
        return {"type": facts.result_type} if facts.result_type else ANYTHING

    def _read(self, source: str) -> ExpressionFacts | None:
        try:
            return self._reader.read(source)
        except Exception:  # a reader that raises must not break compilation
            return None

    # ---------------------------------------------------------------- checks

    def check(self, node_id: str, expressions: Mapping[str, str]) -> list[Diagnostic]:
        """Diagnostics for the paths the node's ``expressions`` (field path -> source) read.

        A node the walk could not reach (on a cycle) is not checked."""
        if node_id not in self._inputs:
            return []
        found: list[Diagnostic] = []
        for field, source in expressions.items():
            facts = self._read(source)
            if facts is None:
                continue  # the syntax check reports it
            messages: set[str] = set()
            for use in facts.paths:
                result = self._resolve(node_id, use, field)
                problems = [result] if isinstance(result, Diagnostic) else result[1]
                for problem in problems:
                    if problem.message not in messages:
                        messages.add(problem.message)
                        found.append(problem)
        return found

    def _resolve(
        self, node_id: str, use: PathUse, field: str | None = None
    ) -> tuple[dict[str, Any], list[Diagnostic]] | Diagnostic:
        """Walk ``use`` from its root: its schema and warnings, or the error that stops it."""

        def problem(
            code: str, message: str, severity: Literal["error", "warning"] = "error"
        ) -> Diagnostic:
            return Diagnostic(severity, code, message, node_id=node_id, field=field)

        warnings: list[Diagnostic] = []
        names = list(use.names)
        if use.root == "steps":
            if not names:
                return self.context(node_id)["$steps"], warnings
            step = names.pop(0)
            if step not in self._specs:
                upstream = ", ".join(sorted(self.upstream(node_id))) or "(none)"
                return problem(
                    "unknown_step", f"$steps has no step {step}; upstream steps: {upstream}"
                )
            if step not in self.upstream(node_id):
                warnings.append(
                    problem(
                        "not_upstream",
                        f"step {step} does not come before this step; its output may not exist yet",
                        "warning",
                    )
                )
            schema, owner = self.output_schema(step), step
        elif use.root == "trigger":
            schema = self.output_schema(self.trigger) if self.trigger else ANYTHING
            owner = "$trigger"
        elif use.root == "run":
            schema, owner = RUN_SCHEMA, "$run"
        else:
            schema, owner = self.input_schema(node_id), _ROOT_OWNER["input"]
        through_list = False
        for name in names:
            through_list = through_list or is_list(schema)
            found = child_schema(schema, name, owner)
            if isinstance(found, Missing):
                return problem(found.code, found.message)
            schema, owner = found, name
        if use.usage != "value" and (through_list or is_list(schema)):
            path = ".".join(use.names) or "$"
            advice = (
                "& joins it as JSON text; use $join() to list its items"
                if use.usage == "text"
                else "arithmetic needs a single number; use $sum() or pick one item"
            )
            warnings.append(problem("list_value", f"{path} is a list; {advice}", "warning"))
        return schema, warnings


def declares_input(diagram: Diagram, catalog: Catalog) -> bool | None:
    """Whether the trigger of ``diagram`` declares the run input's schema itself (its
    ``"x-schema-from"`` config field holds a schema object: ``True``) or leaves it to be
    inferred (``False``); ``None`` when the trigger's output is not the typed run input
    (no trigger, or one such as the webhook that describes its own output)."""
    for node in diagram.nodes:
        spec = catalog.get(node.type)
        if spec is not None and spec.kind == "trigger":
            field = spec.output_schema.get("x-schema-from")
            if not isinstance(field, str):
                return None
            declared = node.config.get(field)
            return isinstance(declared, dict) and bool(declared)
    return None


def _failure(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"error": _ERROR_SCHEMA, "input": data},
        "required": ["error", "input"],
    }


def _with_conditional_properties(
    declared: Mapping[str, Any], conditions: Mapping[str, Any], config: Mapping[str, Any]
) -> dict[str, Any]:
    """``declared`` without the properties whose ``x-properties-if`` condition does not
    hold for ``config``; the conditional properties kept are required."""
    properties: dict[str, Any] = {}
    required = list(declared.get("required") or [])
    for prop, schema in (declared.get("properties") or {}).items():
        condition = conditions.get(prop)
        if isinstance(condition, str):
            negated = condition.startswith("!")
            value = config.get(condition.removeprefix("!"))
            if (value is not False and value not in (None, "", [], {})) == negated:
                continue
            if prop not in required:
                required.append(prop)
        properties[prop] = schema
    required = [name for name in required if name in properties]
    return {**declared, "properties": properties, "required": required}


def _with_property_schemas(
    declared: Mapping[str, Any], replaced: Mapping[str, Any], config: Mapping[str, Any]
) -> dict[str, Any]:
    properties = dict(declared.get("properties") or {})
    for prop, config_field in replaced.items():
        schema = config.get(config_field) if isinstance(config_field, str) else None
        if isinstance(schema, dict) and schema:
            properties[str(prop)] = schema
    return {**declared, "properties": properties}
