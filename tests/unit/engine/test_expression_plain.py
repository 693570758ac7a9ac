"""The direct evaluation of plain JSONata expressions (backend/engine/expression_plain.py)
against jsonata-python, the referee: on every generated expression and document, the direct
evaluation either gives exactly the library's value (type included: 6 is not 6.0, True is
not 1) or steps aside, and never answers where the library raises."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.engine.expression_limits import ExpressionLimits
from backend.engine.expression_plain import Unsure, plain_evaluator
from backend.engine.expressions import CompiledExpression, ExpressionError, compile_expression

NAMES = ["a", "b", "total", "my field"]


def _reference(source: str, data: Any, bindings: dict[str, Any]) -> tuple[str, Any]:
    """jsonata-python's answer alone: ``("value", v)`` or ``("error", code or message)``."""
    expression = CompiledExpression(source)
    expression._plain = None  # the library's own evaluation, for reference
    try:
        return "value", _typed(expression.evaluate(data, bindings))
    except ExpressionError as err:
        return "error", err.code or err.message


def _typed(value: Any) -> Any:
    """``value`` with every scalar tagged by its type, so 1 == 1.0 == True do not pass."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return type(value).__name__, value


def _name(name: str) -> str:
    return f"`{name}`" if " " in name else name


scalars = st.one_of(
    st.integers(-(10**20), 10**20),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.5, -1.5, 3.0, 1e308, 2.0**60]),
    st.text(alphabet="ab10 ", max_size=3),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(NAMES), inner),
    max_leaves=8,
)
documents = st.one_of(st.dictionaries(st.sampled_from(NAMES), values, max_size=4), values)
bindings_ = st.fixed_dictionaries(
    {"v": values, "w": st.dictionaries(st.sampled_from(NAMES), values)}
)

paths = st.builds(
    lambda start, names: ".".join(([start] if start else []) + [_name(n) for n in names]),
    st.sampled_from(["", "", "$", "$v", "$w", "$missing"]),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
)
literals = st.one_of(
    st.integers(-1000, 1000).map(str),
    st.sampled_from(["0.5", "1e+300", "2.0", "0", "1e308"]),
    st.text(alphabet="ab10 ", max_size=3).map(json.dumps),
    st.sampled_from(["true", "false", "null"]),
)
variables = st.sampled_from(["$", "$v", "$w", "$missing"])
OPERATORS = ["+", "-", "*", "/", "%", "=", "!=", "<", "<=", ">", ">=", "and", "or"]


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.builds(
        lambda lhs, op, rhs, wrap: f"({lhs}) {op} ({rhs})" if wrap else f"{lhs} {op} {rhs}",
        inner,
        st.sampled_from(OPERATORS),
        inner,
        st.booleans(),
    )
    return binary | inner.map(lambda e: f"-({e})") | inner.map(lambda e: f"({e})")


expressions = st.recursive(st.one_of(paths, literals, variables), _combine, max_leaves=4)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=expressions, data=documents, bindings=bindings_)
def test_the_direct_evaluation_gives_the_librarys_value_or_steps_aside(
    source: str, data: Any, bindings: dict[str, Any]
) -> None:
    try:
        expression = compile_expression(source)
    except ExpressionError:
        return  # e.g. "- -": not an expression at all
    reference = _reference(source, data, bindings)
    plain = plain_evaluator(expression.tree)
    if plain is not None:
        try:
            direct = plain(data, bindings)
        except Unsure:
            pass
        else:
            # a dict read from the input: the caller copies it, as the engine does
            assert reference == ("value", _typed(direct)), source
    # and through the public evaluation, which falls back where the direct one is unsure
    try:
        public: tuple[str, Any] = ("value", _typed(expression.evaluate(data, bindings)))
    except ExpressionError as err:
        public = ("error", err.code or err.message)
    assert public == reference, source


@pytest.mark.parametrize(
    ("source", "data", "expected"),
    [
        ("body.qty * 2", {"body": {"qty": 3}}, 6),
        ("body.qty * 2", {"body": {"qty": 1.25}}, 2.5),
        ("body.id", {"body": {"id": "A-7"}}, "A-7"),
        ("body", {"body": {"id": 1}}, {"id": 1}),
        ("body.missing.deeper", {"body": {}}, None),
        ("body.id.x", {"body": {"id": 5}}, None),
        ("total > 100", {"total": 150}, True),
        ("total >= 100.5", {"total": 100}, False),
        ("name = 'x'", {"name": "x"}, True),
        ("a != 1", {"a": 1.0}, False),
        ("a / 2", {"a": 3}, 1.5),
        ("a % 3", {"a": 7}, 1),
        ("-a", {"a": 2}, -2),
        ("(a + 1) * 2", {"a": 2}, 6),
        ("a and b", {"a": True, "b": False}, False),
        ("a or b.c", {"a": True, "b": [1]}, True),  # not evaluated: no array met
        ("$steps.lookup.id", {}, 42),
        ("$.`my field`", {"my field": "ok"}, "ok"),
        ("'text'", {}, "text"),
        ("null", {}, None),
    ],
)
def test_the_plain_shapes_are_decided_directly(source: str, data: Any, expected: Any) -> None:
    plain = plain_evaluator(compile_expression(source).tree)
    assert plain is not None, source
    bindings = {"steps": {"lookup": {"id": 42}}}
    assert _typed(plain(data, bindings)) == _typed(expected)
    assert _reference(source, data, bindings) == ("value", _typed(expected))


@pytest.mark.parametrize(
    ("source", "data"),
    [
        ("a.b", {"a": [{"b": 1}, {"b": 2}]}),  # a path over an array
        ("a", {"a": [1]}),  # an array result
        ("a + 1", {"a": None}),  # null in arithmetic
        ("a + 1", {}),  # undefined in arithmetic
        ("a + 1", {"a": "1"}),  # a string in arithmetic: the library's T2001
        ("a / 0", {"a": 1}),  # division by zero
        ("a * a", {"a": 1e308}),  # out of range
        ("a < 'b'", {"a": 1}),  # mixed types
        ("a and true", {"a": 1}),  # JSONata's casting to boolean
        ("$nothing", {}),  # not a binding
        ("a", [1, 2]),  # an array document
    ],
)
def test_what_the_direct_evaluation_cannot_decide_is_left_to_the_library(
    source: str, data: Any
) -> None:
    plain = plain_evaluator(compile_expression(source).tree)
    assert plain is not None
    with pytest.raises(Unsure):
        plain(data, {})


@pytest.mark.parametrize(
    "source",
    [
        "a[0]",
        "a.b[x > 1]",
        "a{b: c}",
        "a^(b)",
        "a@$x.b",
        "a#$i.b",
        "a.%.b",
        "[a]",
        "a[]",
        "{'k': a}",
        "a & b",
        "$string(a)",
        "a ? b : c",
        "$$.a",
        "$$",
        "(a; b)",
        "a.*",
        "**.a",
        "[1..3]",
        "a in [1]",
        "$x := 1",
        "a.(b)",
        "/x/",
        "function($x){$x}",
    ],
)
def test_other_shapes_always_go_to_the_library(source: str) -> None:
    assert plain_evaluator(compile_expression(source).tree) is None


def test_the_limits_still_apply_to_plain_expressions() -> None:
    expression = compile_expression("body.qty * 2")
    data = {"body": {"qty": 3}}
    with pytest.raises(ExpressionError) as depth:
        expression.evaluate(data, limits=ExpressionLimits(max_depth=2))
    assert depth.value.limit == "depth"
    with pytest.raises(ExpressionError) as spent:
        expression.evaluate(data, deadline=time.monotonic() - 1)
    assert spent.value.limit == "time"
    assert expression.evaluate(data, limits=ExpressionLimits(max_depth=3)) == 6


def test_a_string_out_of_parentheses_counts_against_the_limits() -> None:
    limits = ExpressionLimits(max_string_length=10)
    data = {"a": "hello world!!"}
    assert compile_expression("a").evaluate(data, limits=limits) == "hello world!!"  # read
    with pytest.raises(ExpressionError) as made:
        compile_expression("(a)").evaluate(data, limits=limits)
    assert made.value.limit == "string length"


def test_stepping_aside_keeps_nothing_of_the_evaluation_alive() -> None:
    """Each fallback raises its own ``Unsure``: a shared one would chain every traceback,
    and the frames would keep every document evaluated."""
    expression = compile_expression("a + 1")
    document = {"b": 1}  # no "a": the direct evaluation steps aside every time
    before = sys.getrefcount(document)
    for _ in range(50):
        assert expression.evaluate(document) is None
    assert sys.getrefcount(document) == before
