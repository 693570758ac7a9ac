"""A direct evaluator for the plainest JSONata expressions, with the library as referee.

Most expressions in real workflows are a field reference (``body.customer.email``,
``$steps.lookup.id``), a literal, or one arithmetic or comparison operator between such
terms (``body.qty * 2``, ``total > 100``). jsonata-python evaluates each through its
general machinery (sequences, frames, entry/exit hooks, a per-evaluation instance copy), about
40 microseconds for ``body.qty * 2`` on the 2-core reference machine; reading two dict keys
and multiplying takes under two.

:func:`plain_evaluator` looks at a parsed tree once, at compile time. When every node is of
the shapes below, it returns a function that evaluates the tree directly; otherwise
``None`` and the expression always goes through jsonata-python.

- a path of names (`` `quoted names` `` included), optionally starting at a bound variable
  (``$steps.x``) or at ``$`` (the input);
- a bare variable (``$x``, ``$``);
- string, number, ``true``, ``false`` and ``null`` literals;
- ``+ - * / %``, ``= !=``, ``< <= > >=``, ``and``, ``or`` between such terms, unary
  minus, and parentheses around one expression.

The direct function answers only where the outcome is certain from JSONata's rules as
jsonata-python implements them (its own ``Utils.convert_number``, ``Utils.is_numeric`` and
``Utils.is_deep_equal`` are called for numbers and equality). On anything else it raises
:class:`Unsure` and the caller evaluates with jsonata-python, which then decides, error
messages included:

- an array met anywhere (JSONata maps a path over arrays and flattens sequences), or an
  input document that is an array;
- an operator whose operand is undefined or ``null``, of mixed or unsupported types
  (strings in arithmetic, numbers compared with strings, objects), a boolean operand of
  ``and``/``or`` that is not ``true``/``false``;
- any arithmetic failure (division by zero, a result out of range), an integer operand or
  a result beyond 2^53 (the library keeps those exact:
  backend/engine/expression_numbers.py);
- a variable that is not among the bindings.

The evaluation limits (backend/engine/expression_limits.py) cannot be reached by these
shapes: nothing loops, no string or array is produced (values read from the input pass as
they are, as the limits define; a string that comes out of parentheses, which the limits
count, is left to the library), and the nesting depth is the tree's, checked against the
limit by the caller (:attr:`PlainEvaluator.depth`).

tests/unit/engine/test_expression_plain.py checks the direct results against
jsonata-python's on generated expressions and documents.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from jsonata.utils import Utils

__all__ = ["PlainEvaluator", "Unsure", "plain_evaluator"]


class Unsure(Exception):
    """The direct evaluation cannot decide this input: evaluate with jsonata-python.

    Raised as a new instance every time: one shared instance would collect the traceback
    of every raise, and with it the frames (and the documents) of every evaluation that
    ever stepped aside."""


_MISSING = object()

Term = Callable[[Any, Mapping[str, Any] | None], Any]
"""A compiled node: ``(input document, bindings) -> value`` (``None`` for undefined and
``null``), or raises :class:`Unsure`."""

# Attributes a parse-tree node may carry without changing what these shapes mean: the
# token's bookkeeping, and the fields each supported node type reads (checked per type).
_BOOKKEEPING = frozenset({"_outer_instance", "id", "position", "lbp", "bp", "value"})
_FIELDS = {
    "path": frozenset({"type", "steps"}),
    "name": frozenset({"type"}),
    "variable": frozenset({"type"}),
    "string": frozenset({"type"}),
    "number": frozenset({"type"}),
    "value": frozenset({"type"}),
    "binary": frozenset({"type", "lhs", "rhs"}),
    "unary": frozenset({"type", "expression"}),
    "block": frozenset({"type", "expressions"}),
}
_ARITHMETIC = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": lambda a, b: int(math.fmod(a, b)),  # jsonata-python's evaluate_numeric_expression
}
_SAFE = 2**53
"""Beyond this magnitude integers are the library's to compute (exactly: expression_numbers)."""
_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class PlainEvaluator:
    """The direct evaluation of one plain tree: call it as ``evaluator(data, bindings)``.

    Returns the value jsonata-python would return after the engine's conversion to plain
    JSON (undefined and ``null`` both ``None``; a dict read from the input is returned as
    it is, the caller copies it), or raises :class:`Unsure`. ``depth`` is the tree's
    nesting depth, as the evaluator's depth limit counts it (one per node on the way
    down).
    """

    __slots__ = ("_term", "depth")

    def __init__(self, term: Term, depth: int) -> None:
        self._term = term
        self.depth = depth

    def __call__(self, data: Any, bindings: Mapping[str, Any] | None) -> Any:
        if isinstance(data, list):
            raise Unsure  # an array input is a singleton sequence to JSONata
        return self._term(data, bindings)


def plain_evaluator(tree: Any) -> PlainEvaluator | None:
    """The direct evaluator of jsonata-python parse tree ``tree`` (``Parser.Symbol``), or
    ``None`` when any node is outside the shapes of the module doc."""
    try:
        term, depth = _compile(tree)
    except _NotPlain:
        return None
    return PlainEvaluator(term, depth)


class _NotPlain(Exception):
    """A node outside the supported shapes (compile time only)."""


def _check(node: Any) -> str:
    """The node's type when it carries nothing beyond what its type reads, else raise."""
    kind = getattr(node, "type", None)
    allowed = _FIELDS.get(kind) if isinstance(kind, str) else None
    if allowed is None or not isinstance(kind, str):
        raise _NotPlain
    for key, value in vars(node).items():
        if key in _BOOKKEEPING or key in allowed:
            continue
        if not _empty(value):
            raise _NotPlain  # a predicate, stage, group, focus, index, keep-array flag ...
    return kind


def _empty(value: Any) -> bool:
    """True for an attribute the parser left at its default (None, False, 0, "", [])."""
    if value is None or value is False:
        return True
    kind = type(value)
    return (
        (kind is int and value == 0)
        or (kind is str and value == "")
        or (kind is list and not value)
    )


def _compile(node: Any) -> tuple[Term, int]:
    kind = _check(node)
    if kind == "path":
        return _path(node.steps)
    if kind == "variable":
        if node.value == "$":
            raise _NotPlain  # $$, the root: the library binds it, not the caller
        return _variable(node.value), 1
    if kind in ("string", "number", "value"):
        return _literal(node.value), 1
    if kind == "block":  # parentheses around one expression
        inner_nodes = node.expressions
        if not isinstance(inner_nodes, list) or len(inner_nodes) != 1:
            raise _NotPlain
        inner, depth = _compile(inner_nodes[0])
        return _block(inner), depth + 1
    if kind == "unary":
        if node.value != "-":
            raise _NotPlain  # array and object constructors
        inner, depth = _compile(node.expression)
        return _negate(inner), depth + 1
    # binary
    lhs, left = _compile(node.lhs)
    rhs, right = _compile(node.rhs)
    op = node.value
    depth = max(left, right) + 1
    if op in _ARITHMETIC:
        return _arithmetic(_ARITHMETIC[op], lhs, rhs), depth
    if op in _ORDER:
        return _comparison(_ORDER[op], lhs, rhs), depth
    if op in ("=", "!="):
        return _equality(op == "=", lhs, rhs), depth
    if op in ("and", "or"):
        return _boolean(op == "and", lhs, rhs), depth
    raise _NotPlain  # &, .., in


def _path(steps: Any) -> tuple[Term, int]:
    if not isinstance(steps, list) or not steps:
        raise _NotPlain
    names: list[str] = []
    start: str | None = None  # a variable the path starts at ("" is $, the input)
    for index, step in enumerate(steps):
        kind = _check(step)
        if kind == "variable" and index == 0:
            start = str(step.value)
            if start == "$":
                raise _NotPlain  # $$ (the root) is not supported
        elif kind == "name":
            names.append(str(step.value))
        else:
            raise _NotPlain
    # the evaluator's hooks see the path node, then each step node in turn
    depth = 2
    first = None if start is None else _variable(start)

    def path(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        value = data if first is None else first(data, bindings)
        for name in names:
            if isinstance(value, dict):
                value = value.get(name)
            elif isinstance(value, list):
                raise Unsure  # JSONata maps the rest of the path over the array
            else:
                return None  # a name step on a scalar or null matches nothing
        if isinstance(value, list):
            raise Unsure  # sequences and singleton arrays: the library's rules
        return value

    return path, depth


def _variable(name: Any) -> Term:
    name = str(name)
    if name == "":

        def context(data: Any, bindings: Mapping[str, Any] | None) -> Any:
            return data

        return context

    def variable(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        value = _MISSING if bindings is None else bindings.get(name, _MISSING)
        if value is _MISSING or isinstance(value, list):
            raise Unsure  # a built-in function's name, or an array
        return value

    return variable


def _block(inner: Term) -> Term:
    def block(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        value = inner(data, bindings)
        if isinstance(value, str):
            raise Unsure  # a block's string counts against the size limits (the library's)
        return value

    return block


def _literal(value: Any) -> Term:
    def literal(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        return value

    return literal


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def _number(value: Any) -> float:
    """``value`` as jsonata-python's arithmetic reads it (a finite float), or raise
    :class:`Unsure`."""
    if not _is_number(value) or (isinstance(value, int) and abs(value) > _SAFE):
        raise Unsure  # an integer beyond 2^53: the library's exact arithmetic decides
    try:
        if Utils.is_numeric(value):  # False for NaN; raises for an infinity
            return float(value)  # raises for an int beyond a float's range
    except Exception:  # the library's own error
        pass
    raise Unsure


def _converted(result: float) -> Any:
    try:
        number = Utils.convert_number(result)
    except Exception:  # out of range: the library's own error
        raise Unsure from None
    if number is None:
        raise Unsure
    return number


def _negate(inner: Term) -> Term:
    def negate(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        return _converted(-_number(inner(data, bindings)))

    return negate


def _arithmetic(op: Callable[[float, float], Any], lhs: Term, rhs: Term) -> Term:
    def arithmetic(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        a = _number(lhs(data, bindings))
        b = _number(rhs(data, bindings))
        try:
            result = op(a, b)
        except (ArithmeticError, ValueError):
            raise Unsure from None
        if abs(result) >= _SAFE:  # past where a float holds every integer: the library
            raise Unsure
        return _converted(result)

    return arithmetic


def _comparison(op: Callable[[Any, Any], bool], lhs: Term, rhs: Term) -> Term:
    def comparison(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        a = lhs(data, bindings)
        b = rhs(data, bindings)
        if isinstance(a, str) and isinstance(b, str):
            return op(a, b)
        if not (_is_number(a) and _is_number(b)):
            raise Unsure
        if type(a) is not type(b):  # as jsonata-python: an int and a float compare as floats
            a, b = _number(a), _number(b)
        return op(a, b)

    return comparison


def _scalar(value: Any) -> Any:
    """An operand of ``=``/``!=`` as jsonata-python compares it (numbers as floats)."""
    if value is None or isinstance(value, dict | list):
        raise Unsure
    if isinstance(value, bool) or isinstance(value, str):
        return value
    return _number(value)


def _equality(equal: bool, lhs: Term, rhs: Term) -> Term:
    def equality(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        same = Utils.is_deep_equal(_scalar(lhs(data, bindings)), _scalar(rhs(data, bindings)))
        return same if equal else not same

    return equality


def _boolean(conjunction: bool, lhs: Term, rhs: Term) -> Term:
    def boolean(data: Any, bindings: Mapping[str, Any] | None) -> Any:
        a = lhs(data, bindings)
        if a is not True and a is not False:
            raise Unsure  # JSONata's casting of other values to booleans
        if a is not conjunction:  # false and ..., true or ...: the right side is not read
            return a
        b = rhs(data, bindings)
        if b is not True and b is not False:
            raise Unsure
        return b

    return boolean
