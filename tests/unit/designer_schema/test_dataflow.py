"""The typed data-flow check: schemas walked along expression paths, diagnostics on fields."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from backend.engine.expression_paths import JsonataReader
from backend.engine.expressions import JsonataChecker
from backend.services.connectors.catalog import AppCatalog
from designer_schema import Diagnostic, Diagram, compile_diagram
from designer_schema.dataflow import DataFlow
from designer_schema.schema_paths import Missing, child_schema, list_fields
from tests.diagrams import diagram, edge, node

CATALOG = AppCatalog()
BODY = {
    "type": "object",
    "properties": {
        "customer": {"type": "object", "properties": {"email": {"type": "string"}}},
        "qty": {"type": "integer"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "price": {"type": "number"}},
            },
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def compile_(doc: dict[str, Any]) -> tuple[Any, list[Diagnostic]]:
    return compile_diagram(
        msgspec.convert(doc, Diagram), CATALOG, JsonataChecker(), JsonataReader()
    )


def mapped(mapping: dict[str, Any], body_schema: dict[str, Any] | None = BODY) -> list[Diagnostic]:
    """Diagnostics of Webhook (with ``body_schema``) -> Set(mapping)."""
    hook = (
        node("hook", "trigger.webhook", body_schema=body_schema)
        if body_schema
        else node("hook", "trigger.webhook")
    )
    _, found = compile_(
        diagram([hook, node("set_1", "control.set", mapping=mapping)], [edge("hook", "set_1")])
    )
    return found


def by_field(found: list[Diagnostic]) -> dict[str | None, list[tuple[str, str, str]]]:
    result: dict[str | None, list[tuple[str, str, str]]] = {}
    for d in found:
        result.setdefault(d.field, []).append((d.severity, d.code, d.message))
    return result


def test_misspelt_field_names_the_known_fields_and_a_close_match() -> None:
    found = by_field(mapped({"to": "=body.customer.emial"}))
    [(severity, code, message)] = found["mapping.to"]
    assert (severity, code) == ("error", "unknown_field")
    assert message == "customer has no field emial; known: email (did you mean email?)"


def test_valid_paths_have_no_diagnostics() -> None:
    assert (
        mapped(
            {
                "a": "=body.customer.email",
                "b": '="Order of " & body.qty',
                "c": "=$sum(body.items.price)",
                "d": "=body.items[price > 10].sku",
                "e": "=$count(body.tags)",
                "f": "=$trigger.headers.`x-any-header`",
                "g": "=$run.version",
                "h": "=$sum(body.items.(price * 2))",
            }
        )
        == []
    )


def test_list_of_scalars_used_as_object_is_wrong_type() -> None:
    [(severity, code, message)] = by_field(mapped({"x": "=body.tags.name"}))["mapping.x"]
    assert (severity, code) == ("error", "wrong_type")
    assert message == "tags is a list of string; it has no field name"


def test_field_of_a_string_is_wrong_type() -> None:
    [(_, code, message)] = by_field(mapped({"x": "=body.customer.email.domain"}))["mapping.x"]
    assert code == "wrong_type" and message == "email is a string; it has no field domain"


def test_list_joined_into_text_is_a_warning() -> None:
    [(severity, code, message)] = by_field(mapped({"x": '="Tags: " & body.tags'}))["mapping.x"]
    assert (severity, code) == ("warning", "list_value")
    assert message.startswith("body.tags is a list; & joins it as JSON text")


def test_list_in_arithmetic_is_a_warning() -> None:
    [(severity, code, _)] = by_field(mapped({"x": "=body.items.price * 2"}))["mapping.x"]
    assert (severity, code) == ("warning", "list_value")


def test_without_a_body_schema_any_body_path_passes() -> None:
    assert mapped({"x": "=body.anything.at.all"}, body_schema=None) == []


def test_trigger_output_itself_is_closed() -> None:
    [(_, code, message)] = by_field(mapped({"x": "=$trigger.bdy"}))["mapping.x"]
    assert code == "unknown_field"
    assert message.startswith("$trigger has no field bdy; known: auth, body, files, headers")


def test_set_output_is_typed_for_the_next_step() -> None:
    doc = diagram(
        [
            node("hook", "trigger.webhook", body_schema=BODY),
            node("set_1", "control.set", mapping={"total": "=body.qty * 2", "note": "fixed"}),
            node("if_1", "control.if", condition="=totl > 10"),
            node(
                "set_2",
                "control.set",
                mapping={"n": "=$steps.set_1.note", "t": "=$steps.set_1.total"},
            ),
        ],
        [edge("hook", "set_1"), edge("set_1", "if_1"), edge("if_1", "set_2", "true")],
    )
    found = by_field(compile_(doc)[1])
    assert found == {
        "condition": [
            (
                "error",
                "unknown_field",
                "the input has no field totl; known: note, total (did you mean total?)",
            )
        ]
    }


def test_set_output_types_follow_their_expressions() -> None:
    doc = diagram(
        [
            node("hook", "trigger.webhook", body_schema=BODY),
            node("set_1", "control.set", mapping={"who": "=body.customer", "tags": "=body.tags"}),
            node("set_2", "control.set", mapping={"x": "=who.name", "y": "=tags.first"}),
        ],
        [edge("hook", "set_1"), edge("set_1", "set_2")],
    )
    found = by_field(compile_(doc)[1])
    assert found["mapping.x"][0][2] == "who has no field name; known: email"
    assert found["mapping.y"][0][1] == "wrong_type"


def test_keep_input_merges_the_input_fields() -> None:
    doc = diagram(
        [
            node("hook", "trigger.webhook"),
            node("set_1", "control.set", mapping={"a": 1}, keep_input=True),
            node("set_2", "control.set", mapping={"m": "=method & a", "z": "=zz"}),
        ],
        [edge("hook", "set_1"), edge("set_1", "set_2")],
    )
    found = by_field(compile_(doc)[1])
    assert list(found) == ["mapping.z"]


def test_steps_unknown_and_not_upstream() -> None:
    doc = diagram(
        [
            node("hook", "trigger.webhook"),
            node("a", "control.set", mapping={"x": "=$steps.b.y", "q": "=$steps.nope.x"}),
            node("b", "control.set", mapping={"y": 1}),
        ],
        [edge("hook", "a"), edge("hook", "b")],
    )
    found = by_field(compile_(doc)[1])
    assert found["mapping.q"] == [
        ("error", "unknown_step", "$steps has no step nope; upstream steps: hook")
    ]
    assert found["mapping.x"][0][:2] == ("warning", "not_upstream")


def test_join_input_is_keyed_by_the_arrived_steps() -> None:
    doc = diagram(
        [
            node("hook", "trigger.webhook", body_schema=BODY),
            node("a", "control.set", mapping={"x": 1}),
            node("b", "control.set", mapping={"y": 2}),
            node("j", "control.join"),
            node("c", "control.set", mapping={"ok": "=a.x + b.y", "bad": "=a.y"}),
        ],
        [edge("hook", "a"), edge("hook", "b"), edge("a", "j"), edge("b", "j"), edge("j", "c")],
    )
    found = by_field(compile_(doc)[1])
    assert list(found) == ["mapping.bad"] and found["mapping.bad"][0][2].startswith(
        "a has no field y"
    )


def test_error_port_carries_error_and_input() -> None:
    doc = diagram(
        [
            node("hook", "trigger.webhook", body_schema=BODY),
            node("a", "control.set", mapping={"x": 1}, on_error="error_port"),
            node(
                "b",
                "control.set",
                mapping={"m": "=error.message", "q": "=input.body.qty", "w": "=x"},
            ),
        ],
        [edge("hook", "a"), edge("a", "b", "error")],
    )
    found = by_field(compile_(doc)[1])
    assert list(found) == ["mapping.w"]


def test_diagnostics_block_publishing() -> None:
    graph, found = compile_(
        diagram(
            [
                node("hook", "trigger.webhook", body_schema=BODY),
                node("s", "control.set", mapping={"x": "=body.nope"}),
            ],
            [edge("hook", "s")],
        )
    )
    assert graph is None and [d.code for d in found] == ["unknown_field"]


def test_context_lists_upstream_schemas() -> None:
    doc = msgspec.convert(
        diagram(
            [
                node("hook", "trigger.webhook", body_schema=BODY),
                node("s", "control.set", mapping={"x": 1}),
                node("t", "control.set", mapping={}),
            ],
            [edge("hook", "s"), edge("s", "t")],
        ),
        Diagram,
    )
    context = DataFlow.of_diagram(doc, CATALOG, JsonataReader()).context("t")
    assert set(context["$steps"]["properties"]) == {"hook", "s"}
    assert [f.path for f in list_fields(context["$"])] == ["x"]
    paths = [f.path for f in list_fields(context["$trigger"])]
    assert "body.customer.email" in paths and "body.items.sku" in paths


@pytest.mark.parametrize(
    ("schema", "name", "expected"),
    [
        ({}, "x", {}),
        ({"type": "object"}, "x", {}),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": True}, "x", {}),
        (
            {
                "anyOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"x": {"type": "integer"}}},
                ]
            },
            "x",
            {"type": "integer"},
        ),
        ({"type": ["array", "object"]}, "x", {}),
    ],
)
def test_child_schema_accepts(schema: dict[str, Any], name: str, expected: dict[str, Any]) -> None:
    assert child_schema(schema, name, "v") == expected


def test_child_schema_alternatives_all_missing_reports_the_first() -> None:
    found = child_schema({"anyOf": [{"type": "string"}, {"type": "null"}]}, "x", "v")
    assert isinstance(found, Missing) and found.message == "v is a string; it has no field x"


class _NoConfig(msgspec.Struct):
    pass


class _Push(msgspec.Struct):
    ref: str
    commits: list[dict[str, Any]]


def test_connector_trigger_and_action_outputs_are_declared_schemas() -> None:
    from connectors.sdk import Connector, action, trigger

    @action("demo.lookup", label="Lookup", config=_NoConfig)
    async def lookup(config: _NoConfig, input: Any) -> _Push:
        return _Push(ref="", commits=[])

    catalog = AppCatalog()
    catalog.add_connector(
        Connector(
            name="demo",
            label="Demo",
            version="1",
            actions=[lookup],
            triggers=[trigger("demo.push", label="Push", output=_Push)],
        )
    )
    doc = diagram(
        [
            node("t", "demo.push"),
            node("a", "demo.lookup"),
            node(
                "s",
                "control.set",
                mapping={"x": "=$trigger.reff", "y": "=commits.sha", "z": "=ref"},
            ),
        ],
        [edge("t", "a"), edge("a", "s")],
    )
    _, found = compile_diagram(
        msgspec.convert(doc, Diagram), catalog, JsonataChecker(), JsonataReader()
    )
    assert by_field(found) == {
        "mapping.x": [
            (
                "error",
                "unknown_field",
                "$trigger has no field reff; known: commits, ref (did you mean ref?)",
            )
        ]
    }


@pytest.mark.parametrize(
    ("group_by", "present", "absent"), [("", "result", "groups"), ("region", "groups", "result")]
)
def test_aggregate_output_follows_its_group_by(group_by: str, present: str, absent: str) -> None:
    """Aggregate outputs ``groups`` with Group by, else ``result`` (``x-properties-if``):
    the next step may read the one its config gives, and is told when it reads the other."""
    doc = diagram(
        [
            node("hook", "trigger.webhook", body_schema=BODY),
            node(
                "agg",
                "data.aggregate",
                items="=body.items",
                group_by=group_by,
                aggregations=[{"op": "sum", "field": "price", "as": "total"}],
            ),
            node("set_1", "control.set", mapping={"ok": f"={present}", "bad": f"={absent}"}),
        ],
        [edge("hook", "agg"), edge("agg", "set_1")],
    )
    from connectors.builtin.data import connector

    catalog = AppCatalog()
    catalog.add_connector(connector)
    parsed = msgspec.convert(doc, Diagram)
    _, found = compile_diagram(parsed, catalog, JsonataChecker(), JsonataReader())
    assert [(d.field, d.code) for d in found] == [("mapping.bad", "unknown_field")], found
    assert f"known: {present}" in found[0].message
    flow = DataFlow.of_diagram(parsed, catalog, JsonataReader())
    schema = flow.output_schema("agg")
    assert list(schema["properties"]) == [present] and schema["required"] == [present]


CHILD_INPUT = {
    "type": "object",
    "properties": {
        "item": {"type": "object", "properties": {"sku": {"type": "string"}}},
        "index": {"type": "integer"},
    },
    "required": ["item", "index"],
}
"""What a For each passes each child run (the parent's "What each child run receives")."""


def test_manual_trigger_input_schema_is_the_child_contract() -> None:
    """A child reading a field its declared input lacks is an error, so it cannot be
    published; reading what the contract has is fine and typed downstream."""

    def child(mapping: dict[str, Any]) -> tuple[Any, list[Diagnostic]]:
        return compile_(
            diagram(
                [
                    node("start", "trigger.manual", input_schema=CHILD_INPUT),
                    node("s", "control.set", mapping=mapping),
                ],
                [edge("start", "s")],
            )
        )

    graph, found = child({"sku": "=item.sku", "n": "=index + 1"})
    assert graph is not None and found == []
    graph, found = child({"sku": "=sku"})
    assert graph is None
    [(severity, code, message)] = by_field(found)["mapping.sku"]
    assert (severity, code) == ("error", "unknown_field")
    assert "sku" in message and "item" in message
    # without a declared input any path passes, as before
    _, found = compile_(
        diagram(
            [node("start", "trigger.manual"), node("s", "control.set", mapping={"x": "=sku"})],
            [edge("start", "s")],
        )
    )
    assert found == []
