"""Which paths the JSONata reader reports, and which it leaves alone."""

from __future__ import annotations

import pytest

from backend.engine.expression_paths import read_expression
from designer_schema.dataflow import PathUse


def paths(source: str) -> list[tuple[str, str, str]]:
    facts = read_expression(source)
    assert facts is not None
    return [(p.root, ".".join(p.names), p.usage) for p in facts.paths]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('"Hello " & body.customer.name', [("input", "body.customer.name", "text")]),
        (
            "body.qty * body.price",
            [("input", "body.qty", "number"), ("input", "body.price", "number")],
        ),
        ("$trigger.headers.`x-id`", [("trigger", "headers.x-id", "value")]),
        ("$steps.set_1.total > 3", [("steps", "set_1.total", "value")]),
        ("$run.version", [("run", "version", "value")]),
        ("$.body", [("input", "body", "value")]),
        ("-qty", [("input", "qty", "number")]),
        (
            "items[price > 10].sku",
            [("input", "items.price", "value"), ("input", "items.sku", "value")],
        ),
        (
            "$sum(items.(price * qty))",
            [
                ("input", "items", "value"),
                ("input", "items.price", "value"),
                ("input", "items.qty", "value"),
            ],
        ),
        ('{"a": body.x, "b": [c]}', [("input", "body.x", "value"), ("input", "c", "value")]),
        ("a ? b : c", [("input", "a", "value"), ("input", "b", "value"), ("input", "c", "value")]),
    ],
)
def test_reported_paths(source: str, expected: list[tuple[str, str, str]]) -> None:
    assert paths(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "($x := {'a': 1}; $x.b)",  # a variable the expression binds
        "$map([1, 2], function($v) { $v.nothing })",  # a lambda parameter
        "$uppercase('a').foo",  # after a function call
        "**.anything",  # descendants
        "1 + 2",
    ],
)
def test_paths_it_cannot_type_are_left_alone(source: str) -> None:
    assert [p for p in paths(source) if p[1] not in ("", None)] == []


def test_result_facts() -> None:
    assert read_expression('"a" & b').result_type == "string"  # type: ignore[union-attr]
    assert read_expression("$count(x)").result_type == "number"  # type: ignore[union-attr]
    assert read_expression("a < 3").result_type == "boolean"  # type: ignore[union-attr]
    assert read_expression("body.customer").result_path == PathUse(  # type: ignore[union-attr]
        "input", ("body", "customer")
    )
    assert read_expression("body +") is None
