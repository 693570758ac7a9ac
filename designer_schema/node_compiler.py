"""One diagram node -> one workflow step: config checked, expressions extracted, options.

:func:`compile_node` is the per-node half of :func:`designer_schema.compiler.compile_diagram`
(the rules are in that module's docstring).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from designer_schema.catalog import ExpressionChecker, NodeTypeSpec
from designer_schema.config_expressions import ALWAYS_EXPRESSION, EXPRESSION_MARKER, compile_value
from designer_schema.config_types import check_literal, schema_properties, schema_required
from designer_schema.diagnostic_sink import DiagnosticSink
from designer_schema.diagram import Node
from designer_schema.graph import ERROR_PORT, Step
from designer_schema.ordered_fields import ORDERED_FIELDS, entry_problems
from designer_schema.step_options import (
    RESERVED_CONFIG_KEYS,
    config_join,
    parse_join,
    parse_on_error,
    parse_retry,
    parse_timeout,
)


def compile_node(
    node: Node, spec: NodeTypeSpec, checker: ExpressionChecker, sink: DiagnosticSink
) -> Step:
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

    properties = schema_properties(spec.config_schema)
    required = schema_required(spec.config_schema)
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

    field_problems: list[tuple[str, str, str]] = [
        (name, "unbound_reference", "the imported reference could not be bound here; pick one")
        for name in node.unbound or ()
        if name not in missing and node.config.get(name) in (None, "")
    ]
    field_problems += [
        (name, "invalid_config", json_text_error(text))
        for name, text in (node.unparsed or {}).items()
    ]
    for name, code, why in field_problems:
        prop = properties.get(name)
        title = prop.get("title") if isinstance(prop, Mapping) else None
        sink.add(code, f"{title or name}: {why}", node_id=node.id, field=name)

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
            literal = compile_value(value, name, 0, node.id, checker, expressions, sink)
        else:
            literal = value
        config[name] = literal
        # Expressions are checked at run time; None is an unset optional field (a required
        # one was reported as missing_config above).
        if name in expressions or literal is None or name in missing:
            continue
        schema = properties.get(name)
        if isinstance(schema, Mapping):
            check_literal(literal, schema, node.id, name, sink)
            if schema.get(ORDERED_FIELDS):
                for path, message in entry_problems(value):
                    sink.add("invalid_config", message, node_id=node.id, field=f"{name}.{path}")

    outputs = output_ports(node, spec, expressions, sink)
    on_error = parse_on_error(node, sink)
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
        join=config_join(config) if spec.config_join else parse_join(node, sink),
        retry=parse_retry(node, sink),
        timeout=parse_timeout(node, sink),
        on_error=on_error,
        type_version=spec.version,
    )


def output_ports(
    node: Node, spec: NodeTypeSpec, expressions: Mapping[str, str], sink: DiagnosticSink
) -> tuple[str, ...]:
    """The node's output ports: the spec's, then the names listed in its
    ``dynamic_outputs`` field (Switch cases; problems reported as ``invalid_config``)."""
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


def json_text_error(text: str) -> str:
    """Why ``text`` (a JSON setting as typed) is not JSON, with where:
    "not valid JSON (line 3, column 3): Expecting ',' delimiter" (1-based line and column,
    from :class:`json.JSONDecodeError`); "not valid JSON" when it parses after all (the
    designer's parser, the browser's ``JSON.parse``, refused it)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        return f"not valid JSON (line {err.lineno}, column {err.colno}): {err.msg}"
    return "not valid JSON"
