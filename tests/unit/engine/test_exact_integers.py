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
    """``source`` evaluated over ``data`` without the wall-time limit: these cases take
    milliseconds, and a loaded machine descheduling the test must not decide them (the
    limits have their own tests)."""
    return compile_expression(source).evaluate(data, timeout_ms=None)


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


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # $power: integer powers are exact integers, not the nearest double
        ("$power(n, 1)", BIG),
        ("$power(n, 2)", BIG**2),
        ("$power(-n, 3)", -(BIG**3)),
        ("$power(3, 40)", 3**40),  # the double is 12157665459056929024
        ("$power(n, 0)", 1),
        ("$power(3, 2)", 9),
        ("$power(2, 0.5)", 2**0.5),
        # fractional results: the double nearest the true value, from every digit of n
        ("$power(n, -1)", 1 / BIG),
        ("$power(n, 0.5)", 94906265.62425156),
        # $sqrt: the exact root of a square, else the nearest double
        ("$sqrt(n * n)", BIG),
        ("$sqrt(i * i)", ID19),
        ("$sqrt(n)", 94906265.62425156),
        ("$sqrt(16)", 4),
        ("$sqrt(2)", 2**0.5),
        # $average: exact when the count divides the total
        ("$average([n, n])", BIG),
        ("$average([n, n + 2])", BIG + 1),
        ("$average([i, i, i])", ID19),
        ("$average([1, 2])", 1.5),
        # $round at any precision works on the digits
        ("$round(n, 2)", BIG),
        ("$round(n, -1)", 9007199254740990),
        ("$round(n + 2, -1)", 9007199254741000),  # ...995: half to even
        ("$round(i, -3)", 1234567890123457000),
        ("$round(125, -1)", 120),
        # $sum of small integers and fractions keeps JSONata's float sum
        ("$sum([1, 0.5])", 1.5),
        # text from numbers: every digit
        ("$formatNumber(n, '#')", "9007199254740993"),
        ("$formatNumber(n, '#,##0')", "9,007,199,254,740,993"),
        ("$formatNumber(n, '#,##0.00')", "9,007,199,254,740,993.00"),
        ("$formatNumber(i, '#,###')", "1,234,567,890,123,456,789"),
        ("$formatNumber(n, '#%')", "900719925474099300%"),
        ("$formatNumber(-n, '#;(#)')", "(9007199254740993)"),
        ("$formatBase(n, 16)", "20000000000001"),
        ("$formatBase(i, 36)", "9do1sj396nf9"),
        ("$formatInteger(n, '0')", "9007199254740993"),
        (
            "$formatInteger(n, 'w')",
            "nine thousand and seven trillion, one hundred and ninety-nine billion, two hundred"
            " and fifty-four million, seven hundred and forty thousand, nine hundred and"
            " ninety-three",
        ),
        ("$parseInteger('9007199254740993', '0')", BIG),
        ("$number(n)", BIG),
    ],
)
def test_numeric_functions_keep_integers_beyond_2_53_exact(source: str, expected: Any) -> None:
    got = _eval(source, n=BIG, i=ID19)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    "source",
    [
        "$sum([n, 0.5])",
        "$sum([n - 2, 1, 1, 0.5])",  # the integer total is beyond 2^53
        "$average([n, 0.5])",
        "$average([n, n + 1])",  # beyond 2^53 and does not divide
        "$power(n, 1.5)",  # a double beyond 2^53
    ],
)
def test_numeric_functions_refuse_what_cannot_stay_exact(source: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        resolve_config({}, {"mapping.total": source}, {"n": BIG})
    assert caught.value.field == "mapping.total"
    assert "2^53" in str(caught.value) and caught.value.code == "inexact_number"


@pytest.mark.parametrize("source", ["$power(n, 100)", "$power(2, 1024)", "$power(2, 100000000)"])
def test_an_exact_power_beyond_the_double_range_is_refused_as_jsonata_refuses_it(
    source: str,
) -> None:
    with pytest.raises(ExpressionError) as caught:
        resolve_config({}, {"mapping.big": source}, {"n": BIG})
    assert caught.value.field == "mapping.big" and caught.value.code == "D3061"
