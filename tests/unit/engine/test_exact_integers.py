"""Integers beyond 2^53 stay exact in expressions (backend/engine/expression_numbers.py):
text, arithmetic, comparisons, integer-returning functions and integer literals; where
exactness cannot be kept the expression fails naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from backend.engine.expressions import ExpressionError, compile_expression, resolve_config

BIG = 2**53 + 1  # 9007199254740993: the first integer a double cannot hold
ID19 = 1234567890123456789


def _eval(source: str, **data: Any) -> Any:
    return compile_expression(source).evaluate(data)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("n + 1", BIG + 1),
        ("n - 1", BIG - 1),
        ("n * 2", BIG * 2),
        ("-n", -BIG),
        ("n % 10", 3),
        ("-n % 10", -3),  # JSONata's remainder takes the dividend's sign
        ("n / 1", BIG),
        ("(n * 3) / 3", BIG),
        ("n = 9007199254740993", True),
        ("n = 9007199254740992", False),
        ("n != 9007199254740992", True),
        ("n > 9007199254740992", True),
        ("n > 9007199254740992.0", True),
        ("$sum([n, 1])", BIG + 1),
        ("$max([n, 1])", BIG),
        ("$min([n, n + 1])", BIG),
        ("$abs(-n)", BIG),
        ("$floor(n)", BIG),
        ("$ceil(n)", BIG),
        ("$round(n)", BIG),
        ("$number('9007199254740993')", BIG),
        ("$string(n)", "9007199254740993"),
        ('"Order " & (n + 1)', "Order 9007199254740994"),
        ("$string(i + 1)", str(ID19 + 1)),
        ("12345678901234567890 + 1", 12345678901234567891),
    ],
)
def test_integers_beyond_2_53_stay_exact(source: str, expected: Any) -> None:
    got = _eval(source, n=BIG, i=ID19)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("7 / 2", 3.5),
        ("0.1 + 0.2", 0.1 + 0.2),
        ("$round(2.5)", 2),
        ("1.5 + 1", 2.5),
        ("-7 % 3", -1),
    ],
)
def test_other_numbers_keep_jsonata_semantics(source: str, expected: Any) -> None:
    assert _eval(source) == expected


@pytest.mark.parametrize("source", ["n / 2", "n + 0.5", "n * 1.5", "0.5 - n"])
def test_inexact_results_fail_naming_the_field(source: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        resolve_config({}, {"mapping.total": source}, {"n": BIG})
    assert caught.value.field == "mapping.total"
    assert "2^53" in str(caught.value)
