"""Every JSONata evaluation is bounded in time, depth and memory, and says which limit
stopped it (docs/expressions.md, "Limits")."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from backend.engine.expression_limits import DEFAULT_LIMITS, ExpressionLimits
from backend.engine.expressions import (
    MAX_SOURCE_LENGTH,
    ExpressionError,
    compile_expression,
    resolve_config,
)
from backend.engine.states import RunStatus
from backend.engine.watchdog import WATCHDOG, Watchdog
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import compile_dict, run_graph


def stopped(source: str, data: Any = None, **options: Any) -> ExpressionError:
    """Evaluate ``source`` and return the ExpressionError it must raise."""
    with pytest.raises(ExpressionError) as info:
        compile_expression(source).evaluate(data, {}, **options)
    return info.value


@contextmanager
def peak_memory() -> Iterator[list[int]]:
    """Measure the peak of Python allocations inside the block (bytes, in ``[0]``)."""
    tracemalloc.start()
    result = [0]
    try:
        yield result
    finally:
        result[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def test_backtracking_regex_runs_in_linear_time() -> None:
    # /^(a+)+$/ backtracks 2^n times on "aaa...ab" in a backtracking engine: 23 characters
    # take seconds there (and overrun the budget), RE2 answers at once.
    expr = compile_expression("$contains(s, /^(a+)+$/)")
    assert expr.evaluate({"s": "a" * 23 + "b"}) is False
    assert expr.evaluate({"s": "a" * 100_000 + "b"}) is False
    assert expr.evaluate({"s": "a" * 100_000}) is True


def test_regex_functions_keep_their_meaning_on_re2() -> None:
    data = {"s": "Order A-12, order b-7"}
    assert compile_expression("$match(s, /([a-z])-(\\d+)/i).groups").evaluate(data) == [
        "A",
        "12",
        "b",
        "7",
    ]
    assert compile_expression('$replace(s, /(\\d+)/, "#$1")').evaluate(data) == (
        "Order A-#12, order b-#7"
    )
    assert compile_expression("$split(s, /,\\s*/)").evaluate(data) == ["Order A-12", "order b-7"]
    assert compile_expression('$contains("a\\nb", /^b$/m)').evaluate(None) is True


def test_regex_that_needs_backtracking_is_a_compile_error() -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression("$contains(s, /(a)\\1/)")
    assert "linear-time engine" in info.value.message


def test_pad_to_100_mb_is_refused_before_allocating() -> None:
    with peak_memory() as peak:
        err = stopped('$pad("", 100000000)', timeout_ms=None)
    assert err.limit == "string length"
    assert "100,000,000 characters" in err.message and "5,000,000" in err.message
    assert peak[0] < 5_000_000


def test_join_and_replace_are_sized_before_building() -> None:
    data = {"items": ["x" * 1000] * 3000, "s": "a" * 10_000, "r": "z" * 1000}
    with peak_memory() as peak:  # (tracing allocations is slow: no time limit here)
        joined = stopped("$join(items, r)", data, timeout_ms=None)
        replaced = stopped("$replace(s, 'a', r)", data, timeout_ms=None)
        regex = stopped("$replace(s, /a/, r)", data, timeout_ms=None)
    assert joined.limit == replaced.limit == regex.limit == "string length"
    assert peak[0] < 5_000_000
    assert compile_expression('$replace("abab", "b", "cc")').evaluate(None) == "accacc"


def test_a_builtin_looping_past_the_deadline_is_interrupted() -> None:
    # $distinct is quadratic and never returns to the evaluator while it loops.
    before = WATCHDOG.interrupts
    err = stopped("$count($distinct([1..20000]))", timeout_ms=50)
    assert WATCHDOG.interrupts == before + 1
    assert err.limit == "time" and err.code == "D1012"
    assert "time limit of 50 ms" in err.message


def test_watchdog_interrupts_a_python_loop_and_leaves_nothing_behind() -> None:
    class Late(Exception):
        pass

    dog = Watchdog()
    end = time.monotonic() + 5

    def spin() -> None:
        while time.monotonic() < end:
            pass

    with pytest.raises(Late):
        dog.call(time.monotonic() + 0.05, spin, Late)
    # calls that end around their deadline are interrupted inside or not at all: an
    # interrupt never escapes after the call
    for i in range(300):
        try:
            dog.call(time.monotonic() + 0.001, lambda i=i: sum(range(i * 1000)), Late)
        except Late:
            pass
        sum(range(10_000))  # a leaked interrupt would be raised here, failing the test
    sum(range(100_000))


def test_watchdog_sleeps_through_calls_that_end_before_its_next_deadline() -> None:
    class Late(Exception):
        pass

    dog = Watchdog()
    assert dog.call(time.monotonic() + 60, lambda: 1, Late) == 1
    time.sleep(0.05)  # the thread starts and sleeps until that call's deadline
    wakes = dog.wakes
    # 500 calls with later deadlines, the thread free to run between them (as between
    # the requests of a server): none of them needs it awake
    for i in range(500):
        assert dog.call(time.monotonic() + 60, lambda i=i: i * 2, Late) == i * 2
        time.sleep(0.0001)
    assert dog.wakes == wakes
    assert len(dog._heap) <= 2  # disarmed entries do not pile up
    # an earlier deadline still wakes it, and a late call is still stopped
    with pytest.raises(Late):
        dog.call(time.monotonic() + 0.05, lambda: time.sleep(0.3) or sum(range(10**8)), Late)
    assert dog.interrupts == 1


def test_runaway_recursion_stops_at_the_depth_limit() -> None:
    err = stopped("($f := function($n){$n <= 1 ? 1 : $n + $f($n - 1)}; $f(100000))")
    assert err.limit == "depth" and err.code == "D1011"
    assert f"{DEFAULT_LIMITS.max_depth}" in err.message


def test_large_arrays_and_strings_made_by_an_expression_are_refused() -> None:
    assert stopped("[1..2000000]").limit == "array length"
    doubling = stopped('$reduce([1..30], function($a, $v){ $a & $a }, "x")')
    assert doubling.limit == "string length"
    assert compile_expression("$count([1..1000])").evaluate(None) == 1000


def test_total_produced_size_is_bounded() -> None:
    err = stopped('$map([1..10], function($v){ $pad("", 3000000, "x") })')
    assert err.limit == "produced size"


def test_input_values_pass_through_whatever_their_size() -> None:
    big = {"text": "y" * 6_000_000}
    assert len(compile_expression("text").evaluate(big)) == 6_000_000


def test_date_picture_width_is_bounded() -> None:
    assert stopped('$fromMillis(0, "[Y,1000]")').limit == "picture width"
    assert compile_expression('$fromMillis(0, "[Y0001]-[M01]")').evaluate(None) == "1970-01"


def test_expression_length_is_bounded_at_compile() -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression("1" + " + 1" * MAX_SOURCE_LENGTH)
    assert info.value.limit == "expression length"
    assert f"{MAX_SOURCE_LENGTH:,}" in info.value.message


def test_limits_can_be_tightened_per_evaluation() -> None:
    limits = ExpressionLimits(max_string_length=10)
    with pytest.raises(ExpressionError) as info:
        compile_expression('"abcdef" & "ghijkl"').evaluate(None, limits=limits)
    assert info.value.limit == "string length"


def test_resolve_config_names_field_and_limit() -> None:
    with pytest.raises(ExpressionError) as info:
        resolve_config({}, {"body": '$pad("", 100000000)'}, {})
    assert info.value.field == "body" and info.value.limit == "string length"
    assert info.value.message.startswith("field 'body': expression stopped")


def test_step_error_says_which_limit_was_hit() -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("s", "control.set", mapping={"x": "=$contains(body.s, /^(a+)+$/)"}),
            node("pad", "control.set", mapping={"x": '=$pad("", 100000000)'}),
        ],
        [edge("hook", "s"), edge("s", "pad")],
    )
    state, _ = run_graph(compile_dict(d), {"body": {"s": "a" * 23 + "b"}})
    assert state.steps["s"].output == {"x": False}
    assert state.status == RunStatus.FAILED
    error = state.steps["pad"].error
    assert error is not None and error["kind"] == "expression_error"
    assert "string of 100,000,000 characters is over the limit" in error["message"]
