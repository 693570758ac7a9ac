"""Which data paths a JSONata expression reads: the reader behind the typed data-flow check.

:class:`JsonataReader` implements ``designer_schema.dataflow.ExpressionReader`` on
jsonata-python's parse tree (the tree :func:`backend.engine.expressions.compile_expression`
builds and caches). For ``"Hello " & body.customer.name`` it reports the path
``input: body.customer.name`` used as text; for ``$sum(items.(price * qty))`` the paths
``items``, ``items.price`` and ``items.qty`` (a block and a filter read fields of the
items they follow, because JSONata maps over lists).

What it reports, and what it leaves alone so the check never flags a valid expression:

- paths from ``$`` or a bare name (root ``input``), ``$trigger``, ``$steps`` and ``$run``;
- a path is followed through field names (and their filters); at the first other step
  (a function call, ``*``, ``**``, a sort) only the part before it is reported;
- paths from variables an expression binds itself (``$x := ...``, lambda parameters) and
  bare names inside a lambda body (their context is the caller's) are not reported.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from backend.engine.expressions import ExpressionError, compile_expression
from designer_schema.dataflow import ExpressionFacts, PathRoot, PathUsage, PathUse

__all__ = ["JsonataReader", "read_expression"]

_ROOTS: Final[dict[str, PathRoot]] = {"trigger": "trigger", "steps": "steps", "run": "run"}
_NUMBER_OPS: Final = frozenset({"+", "-", "*", "/", "%"})
_BOOLEAN_OPS: Final = frozenset({"=", "!=", "<", "<=", ">", ">=", "and", "or", "in"})
_FUNCTION_TYPES: Final[dict[str, str]] = {
    **dict.fromkeys(
        (
            "string",
            "substring",
            "substringBefore",
            "substringAfter",
            "uppercase",
            "lowercase",
            "trim",
            "pad",
            "join",
            "replace",
            "formatNumber",
            "formatBase",
            "formatInteger",
            "base64encode",
            "base64decode",
            "encodeUrl",
            "encodeUrlComponent",
            "decodeUrl",
            "decodeUrlComponent",
            "now",
            "fromMillis",
            "type",
        ),
        "string",
    ),
    **dict.fromkeys(
        (
            "number",
            "sum",
            "count",
            "max",
            "min",
            "average",
            "abs",
            "floor",
            "ceil",
            "round",
            "power",
            "sqrt",
            "random",
            "millis",
            "toMillis",
            "length",
            "parseInteger",
        ),
        "number",
    ),
    **dict.fromkeys(("boolean", "not", "exists", "contains"), "boolean"),
    **dict.fromkeys(("keys", "split", "append", "reverse", "sort", "distinct", "zip"), "array"),
}
_CHILDREN: Final = (
    "expression", "arguments", "predicate", "stages", "expr", "group", "lhs", "rhs",
    "lhs_object", "rhs_object", "terms", "condition", "then", "_else", "expressions",
    "update", "delete",
)  # fmt: skip

Context = tuple[PathRoot, tuple[str, ...], bool] | None
"""Where relative paths start: root, the names before, and whether that is one item of a
list (inside a filter or block), where a path's value is no list even if its prefix is."""


class JsonataReader:
    """``ExpressionReader`` for JSONata sources (results cached by source)."""

    def read(self, source: str) -> ExpressionFacts | None:
        """The paths ``source`` reads; ``None`` when it does not parse."""
        return read_expression(source)


@functools.lru_cache(maxsize=4096)
def read_expression(source: str) -> ExpressionFacts | None:
    """:meth:`JsonataReader.read` as a cached function (see the module docstring)."""
    try:
        tree = compile_expression(source).tree
    except ExpressionError:
        return None
    found: list[PathUse] = []
    whole = _walk(tree, ("input", (), False), "value", found)
    return ExpressionFacts(paths=tuple(found), result_type=_result_type(tree), result_path=whole)


def _result_type(node: Any) -> str | None:
    kind, value = getattr(node, "type", None), getattr(node, "value", None)
    if kind == "string":
        return "string"
    if kind == "number":
        return "number"
    if kind == "value" and isinstance(value, bool):
        return "boolean"
    if kind == "binary":
        if value == "&":
            return "string"
        if value in _NUMBER_OPS:
            return "number"
        if value in _BOOLEAN_OPS:
            return "boolean"
    if kind == "unary" and value == "-":
        return "number"
    if kind == "unary" and value == "{":
        return "object"
    if kind == "unary" and value == "[":
        return "array"
    if kind == "function":
        procedure = getattr(node, "procedure", None)
        if getattr(procedure, "type", None) == "variable":
            return _FUNCTION_TYPES.get(str(getattr(procedure, "value", "")))
    return None


def _walk(node: Any, ctx: Context, usage: PathUsage, out: list[PathUse]) -> PathUse | None:
    """Record the paths under ``node``; return the path when ``node`` is one whole path."""
    if node is None:
        return None
    if isinstance(node, list | tuple):
        for item in node:
            _walk(item, ctx, usage, out)
        return None
    kind = getattr(node, "type", None)
    if kind is None:
        return None
    if kind == "path":
        return _path(node, ctx, usage, out)
    if kind == "name":
        if ctx is None:
            return None
        named = PathUse(ctx[0], (*ctx[1], str(node.value)), "value" if ctx[2] else usage)
        out.append(named)
        return named
    if kind == "variable":
        root = _ROOTS.get(str(node.value))
        use: PathUse | None = None
        if root is not None:
            use = PathUse(root, (), usage)
        elif node.value == "" and ctx is not None:
            use = PathUse(ctx[0], ctx[1], "value" if ctx[2] else usage)
        if use is not None:
            out.append(use)
        return use
    if kind == "binary":
        operator = node.value
        inner: PathUsage = (
            "text" if operator == "&" else "number" if operator in _NUMBER_OPS else "value"
        )
        _walk(node.lhs, ctx, inner, out)
        _walk(node.rhs, ctx, inner, out)
        return None
    if kind == "unary" and node.value == "-":
        _walk(node.expression, ctx, "number", out)
        return None
    if kind == "lambda":
        _walk(node.body, None, "value", out)
        return None
    if kind == "bind":
        _walk(node.rhs, ctx, "value", out)
        return None
    for attr in _CHILDREN:
        _walk(getattr(node, attr, None), ctx, "value", out)
    return None


def _path(node: Any, ctx: Context, usage: PathUsage, out: list[PathUse]) -> PathUse | None:
    steps = list(node.steps or [])
    if not steps:
        return None
    first = steps[0]
    here: Context = None
    if first.type == "variable":
        root = _ROOTS.get(str(first.value))
        if root is not None:
            here = (root, (), False)
        elif first.value == "" and ctx is not None:
            here = ctx
        rest = steps[1:]
        _walk(first.stages, None if here is None else (*here[:2], True), "value", out)
    else:
        here = ctx
        rest = steps
    complete = True
    for step in rest:
        if here is not None and step.type == "name":
            here = (here[0], (*here[1], str(step.value)), here[2])
            _walk(step.stages, (*here[:2], True), "value", out)
            continue
        if here is not None and complete:
            out.append(PathUse(here[0], here[1], "value"))
        complete = False
        inner = (*here[:2], True) if here is not None and step.type in ("block", "sort") else None
        _walk(step, inner, "value", out)
        here = None
    if here is None or not complete:
        return None
    use = PathUse(here[0], here[1], "value" if here[2] else usage)
    out.append(use)
    return use
