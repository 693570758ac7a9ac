"""Expressions in node config: the ``=`` marker, its ``==`` escape, and syntax checks.

A string starting with :data:`EXPRESSION_MARKER` in one of a node type's expression
fields is a JSONata expression (dicts and lists inside such a field are searched too);
:func:`compile_value` replaces each expression leaf by ``None`` and records its source
by path (``mapping.total``, ``items.0``). The rules are in :mod:`designer_schema.compiler`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from designer_schema.catalog import ExpressionChecker
from designer_schema.diagnostic_sink import DiagnosticSink

EXPRESSION_MARKER: Final = "="
"""A string starting with this, in an expression field, is a JSONata expression."""

ALWAYS_EXPRESSION: Final = "x-always-expression"
"""Config-schema flag: the field is always an expression; the leading ``=`` is optional."""

ESCAPED_MARKER: Final = "=="
"""A string starting with this, in an expression field, is a literal starting with ``=``."""

MAX_DEPTH: Final = 64
"""Deepest nesting of a config value walked for expressions."""


def compile_value(
    value: Any,
    path: str,
    depth: int,
    node_id: str,
    checker: ExpressionChecker,
    expressions: dict[str, str],
    sink: DiagnosticSink,
) -> Any:
    """Return ``value`` with expression leaves replaced by ``None``; record each leaf's
    source in ``expressions`` under its path (``path`` is the field path so far, ``depth``
    its nesting). Reports ``invalid_config`` (too deep, a path used twice) and
    ``expression_syntax`` on ``sink``."""
    if depth > MAX_DEPTH:
        sink.add(
            "invalid_config",
            f"value is nested more than {MAX_DEPTH} levels deep",
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
        message = check_expression(checker, source)
        if message is not None:
            sink.add("expression_syntax", message, node_id=node_id, field=path)
        return None
    if isinstance(value, Mapping):
        return {
            str(k): compile_value(v, f"{path}.{k}", depth + 1, node_id, checker, expressions, sink)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            compile_value(v, f"{path}.{i}", depth + 1, node_id, checker, expressions, sink)
            for i, v in enumerate(value)
        ]
    return value


def check_expression(checker: ExpressionChecker, source: str) -> str | None:
    """The syntax problem of an expression ``source`` (empty, or the checker's message,
    or why the checker failed), or ``None`` when it parses."""
    if not source.strip():
        return "empty expression: write something after '='"
    try:
        return checker.check(source)
    except Exception as exc:  # a checker that raises must not break compilation
        return f"expression could not be checked: {exc}"
