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
  ``$floor``, ``$ceil``, ``$round`` of an integer, at any precision: ``$round(n, -2)``
  rounds half to even on the exact digits); ``$number("9007199254740993")`` of
  an integer literal is that integer, and so is an integer literal in an expression
  (``n = 9007199254740993``);
- ``$power`` of an integer to a non-negative integer exponent is the exact integer
  (``$power(3, 40)`` is 12157665459056928801, not the double 12157665459056929024),
  refused with JSONata's D3061 beyond the double range as JSONata refuses an infinite
  result; ``$average`` of integers is exact when it divides (as ``/``);
- a fractional result of an integer beyond 2^53 that no number can hold exactly anyway
  (``$sqrt(n)`` of a non-square, ``$power(n, 0.5)``, ``$power(n, -1)``) is the double
  nearest the true value, computed from every digit of ``n`` (the library first rounded
  ``n`` to a double), and refused when that double is itself beyond 2^53
  (``$power(n, 1.5)``); ``$sqrt`` of a square is the exact integer root;
- ``$formatNumber``, ``$formatBase``, ``$formatInteger`` and ``$parseInteger`` already
  work on the exact digits of an ``int`` (Python's ``Decimal`` and ``int``); they need
  no change and are pinned by tests;
- where exactness cannot be kept, the expression fails with :class:`InexactNumber` (the
  step's ``expression_error`` names the field): arithmetic mixing an integer beyond
  2^53 with a fractional number (also inside ``$sum`` and ``$average``), or a division
  of one that leaves a remainder (also ``$average``).
"""

from __future__ import annotations

import decimal
import math
import re
import sys
from typing import Any

from jsonata import jexception, tokenizer, utils
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
_SUM, _AVERAGE = Functions.sum, Functions.average
_SQRT, _POWER = Functions.sqrt, Functions.power

_ROOT_DIGITS = decimal.Context(prec=40)
"""Working precision of a fractional root or power of an integer beyond 2^53: 40
significant digits, more than twice a double's 17, so converting the result to a double
rounds once, to the nearest double in all but ties closer than 10^-23 relative."""

_REBOUND = {
    "number": "<(nsb)-:n>",
    "floor": "<n-:n>",
    "ceil": "<n-:n>",
    "round": "<n-n?:n>",
    "sum": "<a<n>:n>",
    "average": "<a<n>:n>",
    "sqrt": "<n-:n>",
    "power": "<n-n:n>",
}
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
    """``$round``: an integer at a precision of 0 or more is itself; at a negative one
    it is rounded half to even on its exact digits (JSONata's rule, Python's ``round``
    of an ``int``)."""
    if _int(arg) and (not precision or precision > 0):
        return arg
    if _int(arg) and _number(precision) and float(precision).is_integer():
        return round(arg, int(precision))
    return _ROUND(arg, precision)


def _refuse_mixed(name: str, args: list[Any]) -> None:
    """Raise :class:`InexactNumber` when ``args`` mix fractional numbers with an integer
    (or an integer total) beyond 2^53: their float sum would round the integer."""
    integers = [a for a in args if _int(a)]
    if len(integers) == len(args):
        return
    if any(abs(i) > SAFE for i in integers) or abs(sum(integers)) > SAFE:
        raise InexactNumber(
            f"{name} of integers beyond 2^53 and fractional numbers has no exact value: "
            "integers beyond 2^53 only add up with integers"
        )


def _sum(args: Any) -> Any:
    """``$sum``: integers add up exactly; see :func:`_refuse_mixed` for a mix."""
    if isinstance(args, list):
        _refuse_mixed("$sum", args)
    return _SUM(args)


def _average(args: Any) -> Any:
    """``$average``: of integers, the exact integer when the count divides the total,
    else the float quotient, refused (:class:`InexactNumber`) when that rounds an
    integer beyond 2^53, as ``/`` is."""
    if not isinstance(args, list) or not args:
        return _AVERAGE(args)
    _refuse_mixed("$average", args)
    if all(_int(a) for a in args):
        total = sum(args)
        if total % len(args) == 0:
            return total // len(args)
        if abs(total) > SAFE:
            raise InexactNumber(
                f"$average of {len(args)} integers totalling {total} has no exact value: "
                "the total is beyond 2^53 and does not divide (use $sum and $floor)"
            )
    return _AVERAGE(args)


def _sqrt(arg: Any) -> Any:
    """``$sqrt``: the exact root of a square integer; of another integer beyond 2^53 the
    double nearest its root (from every digit: :data:`_ROOT_DIGITS`)."""
    if _int(arg) and arg > SAFE:
        root = math.isqrt(arg)
        if root * root == arg:
            return root
        return float(decimal.Decimal(arg).sqrt(_ROOT_DIGITS))
    if _int(arg) and 0 <= arg:
        root = math.isqrt(arg)
        if root * root == arg:
            return root
    return _SQRT(arg)


def _power(base: Any, exponent: Any) -> Any:
    """``$power``: an integer to a non-negative integer exponent is the exact integer,
    refused with JSONata's D3061 ("not finite") beyond the double range; an integer
    beyond 2^53 to another exponent is the double nearest the true value (from every
    digit: :data:`_ROOT_DIGITS`), :class:`InexactNumber` when that is beyond 2^53;
    everything else is the library's float power."""
    if _int(base) and _number(exponent) and float(exponent).is_integer() and exponent >= 0:
        whole = int(exponent)
        magnitude = abs(base)
        if magnitude > 1 and (magnitude.bit_length() - 1) * whole > 1024:
            raise jexception.JException("D3061", 1, base, exponent)
        result = base**whole
        if abs(result) > sys.float_info.max:
            raise jexception.JException("D3061", 1, base, exponent)
        return result
    if _int(base) and abs(base) > SAFE and _number(exponent):
        if base < 0 and not float(exponent).is_integer():
            return _POWER(base, exponent)  # no real value: the library's error
        try:
            exact = _ROOT_DIGITS.power(decimal.Decimal(base), decimal.Decimal(exponent))
        except (decimal.DivisionByZero, decimal.InvalidOperation):
            return _POWER(base, exponent)
        result = float(exact)
        if not math.isfinite(result):
            raise jexception.JException("D3061", 1, base, exponent)
        if abs(result) >= SAFE:
            raise InexactNumber(
                f"$power({base}, {exponent}) has no exact value: a fractional power of an "
                "integer beyond 2^53 is itself beyond 2^53, where a double skips integers"
            )
        return result
    return _POWER(base, exponent)


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
    Functions.sum = staticmethod(_sum)
    Functions.average = staticmethod(_average)
    Functions.sqrt = staticmethod(_sqrt)
    Functions.power = staticmethod(_power)
    for name, signature in _REBOUND.items():
        Jsonata.define_function(name, signature)
    tokenizer.float = _literal
