from __future__ import annotations

import threading
from typing import Any

import pytest

from backend.engine.expressions import (
    CompiledExpression,
    ExpressionError,
    JsonataChecker,
    compile_expression,
    resolve_config,
)

BINDINGS: dict[str, Any] = {
    "trigger": {"body": {"x": 4, "name": "Ada"}},
    "steps": {"set1": {"total": 3}, "fetch": {"status": 200, "body": {"items": [1, 2, 3]}}},
    "run": {"id": "run-1", "workflow_id": "wf-1", "version": 2},
}


def test_compile_error_has_position_and_source() -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression("a +")
    err = info.value
    assert err.source == "a +"
    assert err.position == 3
    assert err.code == "S0207"
    assert "Unexpected end of expression" in str(err)


def test_compile_error_unterminated_object() -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression("{'a': 1")
    assert info.value.position == 7
    assert "Expected }" in info.value.message


def test_compile_is_cached() -> None:
    assert compile_expression("a.b") is compile_expression("a.b")
    assert isinstance(compile_expression("a.b"), CompiledExpression)


def test_checker() -> None:
    checker = JsonataChecker()
    assert checker.check("$steps.set1.total * 2") is None
    message = checker.check("foo(")
    assert message is not None
    assert "position 4" in message
    assert "\n" not in message


def test_evaluate_paths_and_arithmetic() -> None:
    data = {"order": {"lines": [{"qty": 2, "price": 1.5}, {"qty": 1, "price": 3}]}}
    assert compile_expression("$sum(order.lines.(qty * price))").evaluate(data, {}) == 6
    assert compile_expression("order.lines.qty").evaluate(data, {}) == [2, 1]
    assert compile_expression("order.lines[0].price").evaluate(data, {}) == 1.5
    assert compile_expression("$count(order.lines)").evaluate(data) == 2


def test_bindings() -> None:
    expr = compile_expression("$steps.set1.total + $trigger.body.x")
    assert expr.evaluate(None, BINDINGS) == 7
    assert compile_expression("$run.version").evaluate(None, BINDINGS) == 2
    assert compile_expression("$steps.fetch.body.items[-1]").evaluate(None, BINDINGS) == 3
    assert (
        compile_expression("$item.name & '#' & $string($index)").evaluate(
            None, {"item": {"name": "x"}, "index": 3}
        )
        == "x#3"
    )
    # $ is the step input
    assert compile_expression("$.a").evaluate({"a": 1}, BINDINGS) == 1


def test_results_are_plain_values() -> None:
    seq = compile_expression("a.b").evaluate({"a": [{"b": 1}, {"b": 2}]}, {})
    assert type(seq) is list
    rng = compile_expression("[1..3]").evaluate(None, {})
    assert type(rng) is list and rng == [1, 2, 3]
    obj = compile_expression("{'k': [1..2], 'n': null}").evaluate(None, {})
    assert obj == {"k": [1, 2], "n": None}
    assert type(obj["k"]) is list
    assert compile_expression("missing").evaluate({"a": 1}, {}) is None
    assert compile_expression("function($x){$x}").evaluate(None, {}) is None
    assert compile_expression("x * 1").evaluate({"x": 2.0}, {}) == 2


def test_result_does_not_alias_input() -> None:
    data = {"a": {"b": [1, 2]}}
    out = compile_expression("a").evaluate(data, {})
    out["b"].append(3)
    assert data == {"a": {"b": [1, 2]}}


@pytest.mark.parametrize(
    ("source", "data"),
    [
        ("'a' + 1", None),
        ("$nofunction(1)", None),
        ("$number('x')", None),
        ("1 / 0", None),
        ("a ~> 2", None),
    ],
)
def test_runtime_errors(source: str, data: Any) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(source).evaluate(data, {})
    assert info.value.source == source


def test_runtime_error_position() -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression("$nofunction(1)").evaluate(None, {})
    assert info.value.code == "T1006"
    assert info.value.position is not None


def test_runaway_expression_times_out() -> None:
    expr = compile_expression("($f := function($n){$f($n + 1)}; $f(0))")
    with pytest.raises(ExpressionError) as info:
        expr.evaluate(None, {}, timeout_ms=50)
    assert info.value.code == "D1012"


def test_timeout_counts_from_evaluation_not_compile() -> None:
    import time

    expr = compile_expression("1 + 1 + 0")
    time.sleep(0.06)
    assert expr.evaluate(None, {}, timeout_ms=50) == 2


def test_now_is_per_evaluation_and_other_compiles_do_not_interfere() -> None:
    first = compile_expression("$millis()")
    a = first.evaluate(None, {})
    compile_expression("$millis() + 0")  # constructing another parser instance
    b = first.evaluate(None, {})
    assert isinstance(a, int) and b >= a


def test_evaluate_from_other_threads() -> None:
    expr = compile_expression("$sum($.n) + $k")
    results: list[Any] = []

    def work(k: int) -> None:
        for _ in range(50):
            results.append(expr.evaluate({"n": [1, 2]}, {"k": k}) - k)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [3] * 200


def test_resolve_config_paths() -> None:
    config = {
        "url": "https://example.com",
        "mapping": {"keep": 1},
        "headers": {"Accept": "application/json"},
        "items": ["a", "b"],
    }
    expressions = {
        "mapping.total": "$steps.set1.total * 2",
        "headers.X-Token": "$trigger.body.name",
        "items.0": "$uppercase('z')",
        "items.2": "'appended'",
        "new.nested.value": "$run.id",
        "body": "{'x': $trigger.body.x, 'input': $}",
    }
    out = resolve_config(config, expressions, {"in": True}, BINDINGS)
    assert out == {
        "url": "https://example.com",
        "mapping": {"keep": 1, "total": 6},
        "headers": {"Accept": "application/json", "X-Token": "Ada"},
        "items": ["Z", "b", "appended"],
        "new": {"nested": {"value": "run-1"}},
        "body": {"x": 4, "input": {"in": True}},
    }
    # the original is untouched
    assert config["mapping"] == {"keep": 1}
    assert config["items"] == ["a", "b"]


def test_resolve_config_copies_every_container_also_without_expressions() -> None:
    from datetime import date

    config: dict[str, Any] = {
        "rows": [{"cells": [1, 2.5, True, None, "x"]}],
        "pair": ([1], "a"),  # not JSON: copied as copy.deepcopy copies it
        "when": date(2026, 12, 2),
    }
    out = resolve_config(config, {}, None)
    assert out == config
    out["rows"][0]["cells"].append("changed")
    out["pair"][0].append(2)
    assert config["rows"] == [{"cells": [1, 2.5, True, None, "x"]}]
    assert config["pair"] == ([1], "a")
    assert out["rows"] is not config["rows"] and out["rows"][0] is not config["rows"][0]


def test_resolve_config_runtime_error_names_field() -> None:
    with pytest.raises(ExpressionError) as info:
        resolve_config({}, {"mapping.total": "'a' + 1"}, None, BINDINGS)
    err = info.value
    assert err.field == "mapping.total"
    assert "mapping.total" in str(err)
    assert err.source == "'a' + 1"


def test_resolve_config_syntax_error_names_field() -> None:
    with pytest.raises(ExpressionError) as info:
        resolve_config({}, {"url": "foo("}, None, {})
    assert info.value.field == "url"
    assert info.value.position == 4
    assert str(info.value).startswith("field 'url':")


def test_resolve_config_bad_path() -> None:
    with pytest.raises(ExpressionError) as info:
        resolve_config({"url": "x"}, {"url.part": "1"}, None, {})
    assert info.value.field == "url.part"
    with pytest.raises(ExpressionError) as info:
        resolve_config({"items": [1]}, {"items.five": "1"}, None, {})
    assert "not a list index" in str(info.value)
    with pytest.raises(ExpressionError):
        resolve_config({"items": [1]}, {"items.7": "1"}, None, {})
