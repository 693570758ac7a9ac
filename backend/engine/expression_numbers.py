"""Integers stay exact in expressions: as text, in arithmetic and in comparisons.

JSONata's numbers are JavaScript doubles; jsonata-python follows that by turning numbers
into floats, so integers beyond 2^53 (Discord, Twitter and payment ids, 19-digit order
numbers) lost digits: ``$string(1234567890123456)`` gave ``"1.23456789012346e+15"``,
``n + 1`` and ``n - 1`` of 9007199254740993 gave the same wrong number, and
``9007199254740993 = 9007199254740992`` was true. In Railyard an integer read from a
run's input is a Python ``int`` holding every digit that arrived (msgspec decodes JSON
integers exactly, PostgreSQL's ``jsonb`` stores them exactly, the API writes them back
exactly), and :func:`install` (run once, at import of :mod:`backend.engine.expressions`)
makes the evaluator keep it so:

- text: an ``int`` becomes its exact digits (floats keep JSONata's 15-digit form);
- ``+``, ``-``, ``*``, ``%`` of two integers and unary ``-`` are exact integer arithmetic
  (equal to JavaScript's wherever JavaScript is exact); ``/`` of two integers is exact
  when it divides, else the float quotient;
- ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` compare an integer and a float by value
  (Python's comparison is exact), never by rounding the integer first;
- functions returning an integer keep it (``$abs``, ``$max``, ``$min``, ``$sum``,
  ``$floor``, ``$ceil``, ``$round`` of an integer); ``$number("9007199254740993")`` of
  an integer literal is that integer, and so is an integer literal in an expression
  (``n = 9007199254740993``);
- where exactness cannot be kept, the expression fails with :class:`InexactNumber` (the
  step's ``expression_error`` names the field): arithmetic mixing an integer beyond
  2^53 with a fractional number, or a division of one that leaves a remainder.
"""

from __future__ import annotations

import math
import re
from typing import Any

from jsonata import tokenizer, utils
from jsonata.functions import Functions
from jsonata.jsonata import Jsonata

SAFE = 2**53
"""Beyond this magnitude not every integer is a double (``Number.MAX_SAFE_INTEGER`` + 1)."""

_INTEGER = re.compile(r"-?[0-9]+")
_LIBRARY_ENCODER = Functions.Encoder
_NUMERIC = Jsonata.evaluate_numeric_expression
_EQUALITY = Jsonata.evaluate_equality_expression
_COMPARISON = Jsonata.evaluate_comparison_expression
_UNARY = Jsonata.evaluate_unary
_CONVERT = utils.Utils.convert_number
_NUMBER = Functions.number
_FLOOR, _CEIL, _ROUND = Functions.floor, Functions.ceil, Functions.round


_REBOUND = {"number": "<(nsb)-:n>", "floor": "<n-:n>", "ceil": "<n-:n>", "round": "<n-n?:n>"}
"""The functions :func:`install` replaces, with their JSONata signatures (as the library
defines them)."""


class InexactNumber(ValueError):
    """An operation on an integer beyond 2^53 whose result would not be exact."""


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ExactIntegerEncoder(_LIBRARY_ENCODER):  # type: ignore[misc,valid-type]
    """The library's encoder, but an ``int`` (not a ``bool``) becomes its exact digits."""

    def encode(self, arg: Any) -> str:
        if _int(arg):
            return str(arg)
        return str(super().encode(arg))


def _arithmetic(self: Jsonata, lhs: Any, rhs: Any, op: str | None) -> Any:
    if _int(lhs) and _int(rhs):
        if op == "+":
            return lhs + rhs
        if op == "-":
            return lhs - rhs
        if op == "*":
            return lhs * rhs
        if op == "%" and rhs != 0:
            return int(math.copysign(abs(lhs) % abs(rhs), lhs))  # fmod: the dividend's sign
        if op == "/" and rhs != 0:
            if lhs % rhs == 0:
                return lhs // rhs
            if abs(lhs) > SAFE or abs(rhs) > SAFE:
                raise InexactNumber(
                    f"{lhs} / {rhs} has no exact value: an integer beyond 2^53 divided "
                    "with a remainder (use $floor or %, or keep the id as text)"
                )
    elif (_int(lhs) and _number(rhs) and abs(lhs) > SAFE) or (
        _int(rhs) and _number(lhs) and abs(rhs) > SAFE
    ):
        big = lhs if _int(lhs) else rhs
        raise InexactNumber(
            f"{op} of {big} with a fractional number has no exact value: "
            "integers beyond 2^53 only add, subtract, multiply and divide with integers"
        )
    return _NUMERIC(self, lhs, rhs, op)


def _equality(self: Jsonata, lhs: Any, rhs: Any, op: str | None) -> Any:
    if _number(lhs) and _number(rhs) and op in ("=", "!="):
        return (lhs == rhs) == (op == "=")
    return _EQUALITY(self, lhs, rhs, op)


def _comparison(self: Jsonata, lhs: Any, rhs: Any, op: str | None) -> Any:
    if _number(lhs) and _number(rhs) and type(lhs) is not type(rhs):
        return {"<": lhs < rhs, "<=": lhs <= rhs, ">": lhs > rhs, ">=": lhs >= rhs}.get(op or "")
    return _COMPARISON(self, lhs, rhs, op)


def _unary(self: Jsonata, expr: Any, input: Any, environment: Any) -> Any:
    if str(expr.value) == "-":
        value = self.eval(expr.expression, input, environment)
        if _int(value):
            return -value
    return _UNARY(self, expr, input, environment)


def _convert(n: Any) -> Any:
    return n if _int(n) else _CONVERT(n)


def _number_of(arg: Any) -> Any:
    if isinstance(arg, str) and _INTEGER.fullmatch(arg.strip()):
        return int(arg.strip())
    return _NUMBER(arg)


def _floor(arg: Any) -> Any:
    return arg if _int(arg) else _FLOOR(arg)


def _ceil(arg: Any) -> Any:
    return arg if _int(arg) else _CEIL(arg)


def _round(arg: Any, precision: Any) -> Any:
    return arg if _int(arg) and not precision else _ROUND(arg, precision)


def _literal(text: Any) -> Any:
    """A number literal of an expression: an integer literal exactly, others as floats."""
    if isinstance(text, str) and _INTEGER.fullmatch(text):
        return int(text)
    return float(text)


def install() -> None:
    """Make jsonata-python keep integers exact (idempotent; see the module doc). The
    functions are bound again in the evaluator's static frame, which holds the methods
    it found at import; the tokenizer reads number literals through :func:`_literal`
    (its module's ``float``)."""
    Functions.Encoder = ExactIntegerEncoder
    Jsonata.evaluate_numeric_expression = _arithmetic
    Jsonata.evaluate_equality_expression = _equality
    Jsonata.evaluate_comparison_expression = _comparison
    Jsonata.evaluate_unary = _unary
    utils.Utils.convert_number = staticmethod(_convert)
    Functions.number = staticmethod(_number_of)
    Functions.floor = staticmethod(_floor)
    Functions.ceil = staticmethod(_ceil)
    Functions.round = staticmethod(_round)
    for name, signature in _REBOUND.items():
        Jsonata.define_function(name, signature)
    tokenizer.float = _literal
