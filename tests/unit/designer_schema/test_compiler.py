"""One test per diagnostic code, plus the happy path and the finer rules of the compiler."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from designer_schema import (
    DIAGNOSTIC_CODES,
    NOTE_TYPE,
    Diagram,
    Edge,
    JoinSpec,
    Node,
    RetryPolicy,
    StaticCatalog,
    Transition,
    canonical_hash,
    compile_diagram,
)
from designer_schema.diagnostics import Diagnostic
from designer_schema.ignored import IGNORED_CODES

from ._fakes import (
    CATALOG,
    ParenChecker,
    codes,
    compile_,
    edge,
    happy_diagram,
    node,
    only,
    spec,
)


def ignoring_unknown_keys(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics without the warnings about ignored keys and settings
    (designer_schema.ignored), for tests about other rules."""
    return [d for d in diagnostics if d.code not in IGNORED_CODES]


def with_trigger(*nodes_: Node, edges: list[Edge] | None = None) -> Diagram:
    """A diagram with a manual trigger ``t`` wired to every given node through ``in``."""
    built = [node("t", "trigger.manual"), *nodes_]
    wired = edges if edges is not None else [edge("t", n.id) for n in nodes_]
    return Diagram(nodes=built, edges=wired)


# --- happy path -------------------------------------------------------------------------


def test_happy_path_compiles_to_graph() -> None:
    checker = ParenChecker()
    graph, diagnostics = compile_diagram(happy_diagram(), CATALOG, checker)

    assert diagnostics == []
    assert graph is not None
    assert graph.trigger == "hook"
    assert [s.id for s in graph.steps] == ["hook", "prepare", "check", "notify", "reply"]
    assert graph.transitions == [
        Transition("hook", "prepare"),
        Transition("prepare", "check"),
        Transition("check", "notify", "true"),
        Transition("check", "reply", "false"),
    ]
    assert graph.content_hash == canonical_hash(graph)
    assert len(graph.content_hash) == 64

    hook = graph.step("hook")
    assert hook.kind == "trigger"
    assert hook.config == {"method": "POST"}

    prepare = graph.step("prepare")
    assert prepare.kind == "control"
    assert prepare.config == {"values": {"total": None, "currency": "EUR"}}
    assert prepare.expressions == {"values.total": "$sum(body.items.price)"}

    check = graph.step("check")
    assert check.outputs == ("true", "false")
    assert check.config == {"condition": None}
    assert check.expressions == {"condition": "prepare.total > 100"}

    notify = graph.step("notify")
    assert notify.kind == "action"
    assert notify.expressions == {
        "headers.X-Token": "trigger.headers.token",
        "body.total": "prepare.total",
    }
    assert notify.config["body"] == {"total": None, "note": "=not an expression"}
    assert notify.config["url"] == "https://example.test/hook"
    assert notify.retry == RetryPolicy(max_attempts=3, initial_interval=2.0)
    assert notify.timeout == 30.0
    assert notify.on_error == "fail"
    # reserved keys stay in config as written
    assert notify.config["timeout"] == 30

    reply = graph.step("reply")
    assert reply.outputs == ()
    assert reply.config == {"status": 200, "body": None}
    assert reply.expressions == {"body": "prepare"}

    assert sorted(checker.seen) == sorted(
        [
            "$sum(body.items.price)",
            "prepare.total > 100",
            "trigger.headers.token",
            "prepare.total",
            "prepare",
        ]
    )


def test_every_emitted_code_is_documented() -> None:
    assert len(set(DIAGNOSTIC_CODES)) == len(DIAGNOSTIC_CODES) == 24


# --- nodes ------------------------------------------------------------------------------


def test_an_empty_node_id_is_an_error() -> None:
    diagram = with_trigger(node("", "control.merge"), edges=[edge("t", "")])
    graph, diagnostics = compile_(diagram)
    assert graph is None
    [empty] = only(diagnostics, "invalid_node_id")
    assert empty.severity == "error" and "'control.merge'" in empty.message


def test_duplicate_node_id() -> None:
    diagram = with_trigger(
        node("a", "control.merge"),
        node("a", "control.merge"),
        edges=[edge("t", "a")],
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    [dup] = only(diagnostics, "duplicate_node_id")
    assert dup.node_id == "a"
    assert dup.severity == "error"


def test_unknown_node_type() -> None:
    graph, diagnostics = compile_(with_trigger(node("x", "nope.missing")))
    assert graph is None
    [diag] = diagnostics
    assert (diag.code, diag.node_id) == ("unknown_node_type", "x")
    assert "nope.missing" in diag.message


@pytest.mark.parametrize("value", [None, "", "absent"])
def test_missing_config(value: object) -> None:
    config: dict[str, Any] = {} if value == "absent" else {"url": value}
    graph, diagnostics = compile_(with_trigger(node("h", "http.request", method="GET", **config)))
    assert graph is None
    [diag] = diagnostics
    assert (diag.code, diag.node_id, diag.field) == ("missing_config", "h", "url")


def test_required_expression_field_set_to_expression_is_not_missing() -> None:
    graph, diagnostics = compile_(
        with_trigger(node("h", "http.request", method="GET", url="=trigger.url"))
    )
    assert diagnostics == []
    assert graph is not None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("method", "PATCH"),  # not in enum
        ("method", 3),  # wrong type
        ("max_redirects", 1.5),
        ("max_redirects", True),  # booleans are not integers
        ("ratio", "0.5"),
        ("headers", ["a"]),
        ("items", {"a": 1}),
        ("label_text", 5),
        ("payload", "x"),
        ("label_text", "=1 + 1"),  # not an expression field: a literal... that is a string
    ],
)
def test_invalid_config(field: str, value: object) -> None:
    config: dict[str, Any] = {"url": "https://x.test", "method": "GET", field: value}
    graph, diagnostics = compile_(with_trigger(node("h", "http.request", **config)))
    if field == "label_text" and isinstance(value, str):
        assert diagnostics == []  # a literal string in a string field is fine
        return
    assert graph is None
    [diag] = diagnostics
    assert (diag.code, diag.node_id, diag.field) == ("invalid_config", "h", field)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_redirects", 3),
        ("max_redirects", 3.0),
        ("ratio", 1),
        ("ratio", 0.25),
        ("payload", None),
        ("payload", {"a": 1}),
        ("label_text", None),  # unset optional field
        ("unknown_field", object),  # not in schema: not checked (but must be JSON below)
    ],
)
def test_valid_literal_config(field: str, value: object) -> None:
    if value is object:
        value = {"free": "form"}
    config: dict[str, Any] = {"url": "https://x.test", "method": "GET", field: value}
    graph, diagnostics = compile_(with_trigger(node("h", "http.request", **config)))
    assert ignoring_unknown_keys(diagnostics) == []
    assert graph is not None


def test_unparsed_json_text_is_invalid_config_at_its_field_with_line_and_column() -> None:
    typed = '{\n  "a": 1\n  "b": 2\n}'
    config: dict[str, Any] = {"url": "https://x.test", "method": "GET", "payload": {"a": 1}}
    drawn = msgspec.structs.replace(
        node("h", "http.request", **config), unparsed={"payload": typed}
    )
    graph, diagnostics = compile_(with_trigger(drawn))
    assert graph is None
    [diag] = diagnostics
    assert (diag.code, diag.node_id, diag.field) == ("invalid_config", "h", "payload")
    assert diag.message.endswith("not valid JSON (line 3, column 3): Expecting ',' delimiter")
    # kept in the draft as typed, left out when none
    assert msgspec.json.decode(msgspec.json.encode(drawn), type=Node).unparsed == {"payload": typed}
    assert b"unparsed" not in msgspec.json.encode(node("h", "http.request", **config))


def test_expression_in_typed_field_is_exempt_from_type_check() -> None:
    config: dict[str, Any] = {"url": "https://x.test", "method": "GET", "items": "=trigger.list"}
    graph, diagnostics = compile_(with_trigger(node("h", "http.request", **config)))
    assert diagnostics == []
    assert graph is not None
    assert graph.step("h").expressions == {"items": "trigger.list"}


def test_non_json_config_is_invalid_config() -> None:
    graph, diagnostics = compile_(with_trigger(node("m", "control.merge", weird=complex(1, 2))))
    assert graph is None
    assert codes(ignoring_unknown_keys(diagnostics)) == ["invalid_config"]


def test_expression_syntax_reports_field_path_and_checker_message() -> None:
    diagram = with_trigger(
        node("s", "control.set", values={"ok": "=a(b)", "bad": {"deep": ["x", "=f(("]}}),
        node("c", "control.if", condition="=)"),
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    found = [(d.code, d.node_id, d.field, d.message) for d in diagnostics]
    assert found == [
        ("expression_syntax", "s", "values.bad.deep.1", "unclosed '('"),
        ("expression_syntax", "c", "condition", "unexpected ')' at position 0"),
    ]


def test_empty_expression_is_a_syntax_error() -> None:
    graph, diagnostics = compile_(with_trigger(node("c", "control.if", condition="=  ")))
    assert graph is None
    assert [(d.code, d.field) for d in diagnostics] == [("expression_syntax", "condition")]


def test_checker_that_raises_becomes_a_diagnostic() -> None:
    class Boom:
        def check(self, source: str) -> str | None:
            raise RuntimeError("kaput")

    graph, diagnostics = compile_diagram(
        with_trigger(node("c", "control.if", condition="=x")), CATALOG, Boom()
    )
    assert graph is None
    [diag] = diagnostics
    assert diag.code == "expression_syntax"
    assert "kaput" in diag.message


# --- expression marker and escaping -----------------------------------------------------


def test_double_equals_escapes_a_literal_string_in_expression_fields() -> None:
    checker = ParenChecker()
    diagram = with_trigger(
        node("s", "control.set", values={"formula": "==A1+B1", "plain": "=(1)", "x": "==("}),
    )
    graph, diagnostics = compile_diagram(diagram, CATALOG, checker)
    assert diagnostics == []
    assert graph is not None
    step = graph.step("s")
    assert step.config == {"values": {"formula": "=A1+B1", "plain": None, "x": "=("}}
    assert step.expressions == {"values.plain": "(1)"}
    assert checker.seen == ["(1)"]  # escaped literals never reach the checker


def test_equals_outside_expression_fields_is_literal() -> None:
    checker = ParenChecker()
    config: dict[str, Any] = {
        "url": "https://x.test",
        "method": "GET",
        "label_text": "=((",
        "other": "==x",
    }
    graph, diagnostics = compile_diagram(
        with_trigger(node("h", "http.request", **config)), CATALOG, checker
    )
    assert ignoring_unknown_keys(diagnostics) == []
    assert graph is not None
    step = graph.step("h")
    assert step.config["label_text"] == "=(("
    assert step.config["other"] == "==x"
    assert step.expressions == {}
    assert checker.seen == []


def test_expression_paths_use_list_indexes() -> None:
    config: dict[str, Any] = {"url": "=u", "method": "GET", "items": ["a", "=x", {"k": "=y"}]}
    graph, diagnostics = compile_(with_trigger(node("h", "http.request", **config)))
    assert diagnostics == []
    assert graph is not None
    step = graph.step("h")
    assert step.expressions == {"url": "u", "items.1": "x", "items.2.k": "y"}
    assert step.config["items"] == ["a", None, {"k": None}]


def test_colliding_expression_paths_are_invalid_config() -> None:
    values = {"a.b": "=x", "a": {"b": "=y"}}
    graph, diagnostics = compile_(with_trigger(node("s", "control.set", values=values)))
    assert graph is None
    assert [(d.code, d.field) for d in diagnostics] == [("invalid_config", "values.a.b")]


# --- edges ------------------------------------------------------------------------------


def test_dangling_edge() -> None:
    diagram = with_trigger(
        node("m", "control.merge"),
        edges=[edge("t", "m", id="ok"), edge("m", "ghost", id="bad")],
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    [diag] = diagnostics
    assert (diag.code, diag.edge_id, diag.node_id) == ("dangling_edge", "bad", "m")
    assert "ghost" in diag.message


def test_unknown_source_port() -> None:
    diagram = with_trigger(
        node("c", "control.if", condition=True),
        node("m", "control.merge"),
        edges=[edge("t", "c"), edge("c", "m", "maybe", id="e")],
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    [diag] = diagnostics
    assert (diag.code, diag.edge_id, diag.node_id) == ("unknown_port", "e", "c")


def test_unknown_target_port() -> None:
    diagram = with_trigger(node("m", "control.merge"), edges=[edge("t", "m", "out", "left")])
    graph, diagnostics = compile_(diagram)
    assert graph is None
    assert [(d.code, d.node_id) for d in diagnostics] == [("unknown_port", "m")]


def test_edge_into_trigger_is_unknown_port() -> None:
    diagram = Diagram(
        nodes=[node("t", "trigger.webhook"), node("m", "control.merge")],
        edges=[edge("t", "m"), edge("m", "t", id="back")],
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    [port] = only(diagnostics, "unknown_port")
    assert (port.edge_id, port.node_id) == ("back", "t")
    assert "trigger" in port.message
    assert only(diagnostics, "cycle")  # and it closes a cycle


def test_duplicate_edge_same_connection() -> None:
    diagram = with_trigger(
        node("m", "control.merge"), edges=[edge("t", "m", id="e1"), edge("t", "m", id="e2")]
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    [diag] = diagnostics
    assert (diag.code, diag.edge_id) == ("duplicate_edge", "e2")


def test_duplicate_edge_id() -> None:
    diagram = with_trigger(
        node("a", "control.merge"),
        node("b", "control.merge"),
        edges=[edge("t", "a", id="same"), edge("t", "b", id="same")],
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    [diag] = diagnostics
    assert (diag.code, diag.edge_id) == ("duplicate_edge", "same")


# --- triggers, reachability, cycles ------------------------------------------------------


def test_no_trigger() -> None:
    diagram = Diagram(nodes=[node("m", "control.merge")])
    graph, diagnostics = compile_(diagram)
    assert graph is None
    assert codes(diagnostics) == ["no_trigger"]  # no unreachable_node noise without a trigger


def test_empty_diagram_has_no_trigger() -> None:
    graph, diagnostics = compile_(Diagram())
    assert graph is None
    assert codes(diagnostics) == ["no_trigger"]


def test_multiple_triggers_flags_each_extra_trigger() -> None:
    diagram = Diagram(
        nodes=[
            node("t1", "trigger.webhook"),
            node("t2", "trigger.manual"),
            node("t3", "trigger.manual"),
        ]
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    assert [(d.code, d.node_id) for d in diagnostics] == [
        ("multiple_triggers", "t2"),
        ("multiple_triggers", "t3"),
    ]


def test_unreachable_node_is_an_error() -> None:
    diagram = with_trigger(
        node("a", "control.merge"),
        node("island", "control.merge"),
        node("after_island", "control.merge"),
        edges=[edge("t", "a"), edge("island", "after_island")],
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    assert [(d.code, d.node_id, d.severity) for d in diagnostics] == [
        ("unreachable_node", "island", "error"),
        ("unreachable_node", "after_island", "error"),
    ]


def test_cycle_names_every_node_in_it() -> None:
    diagram = with_trigger(
        node("a", "control.merge"),
        node("b", "control.merge"),
        node("c", "control.merge"),
        edges=[edge("t", "a"), edge("a", "b"), edge("b", "c"), edge("c", "a")],
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    cycle = only(diagnostics, "cycle")
    assert [d.node_id for d in cycle] == ["a", "b", "c"]
    assert all("'a', 'b', 'c'" in d.message for d in cycle)
    assert codes(diagnostics) == ["cycle"] * 3


def test_self_loop_is_a_cycle() -> None:
    diagram = with_trigger(node("a", "control.merge"), edges=[edge("t", "a"), edge("a", "a")])
    graph, diagnostics = compile_(diagram)
    assert graph is None
    assert [(d.code, d.node_id) for d in diagnostics] == [("cycle", "a")]


def test_two_separate_cycles() -> None:
    diagram = with_trigger(
        node("a", "control.merge"),
        node("b", "control.merge"),
        node("c", "control.merge"),
        edges=[edge("t", "a"), edge("a", "a"), edge("a", "b"), edge("b", "c"), edge("c", "b")],
    )
    _, diagnostics = compile_(diagram)
    assert [d.node_id for d in only(diagnostics, "cycle")] == ["a", "b", "c"]


def test_diamond_is_not_a_cycle() -> None:
    diagram = with_trigger(
        node("c", "control.if", condition=True),
        node("x", "control.merge"),
        node("y", "control.merge"),
        node("j", "control.merge", join={"mode": "n_of_m", "count": 2}),
        edges=[
            edge("t", "c"),
            edge("c", "x", "true"),
            edge("c", "y", "false"),
            edge("x", "j"),
            edge("y", "j"),
        ],
    )
    graph, diagnostics = compile_(diagram)
    assert diagnostics == []
    assert graph is not None
    assert graph.step("j").join == JoinSpec(mode="n_of_m", count=2)


# --- ports: dynamic outputs and the error port ------------------------------------------


def test_dynamic_outputs_from_config_list() -> None:
    diagram = with_trigger(
        node("sw", "control.switch", value="=trigger.kind", cases=["gold", "silver"]),
        node("g", "control.merge"),
        node("s", "control.merge"),
        node("d", "control.merge"),
        edges=[
            edge("t", "sw"),
            edge("sw", "g", "gold"),
            edge("sw", "s", "silver"),
            edge("sw", "d", "default"),
        ],
    )
    graph, diagnostics = compile_(diagram)
    assert diagnostics == []
    assert graph is not None
    assert graph.step("sw").outputs == ("default", "gold", "silver")


def test_dynamic_output_not_listed_is_unknown_port() -> None:
    diagram = with_trigger(
        node("sw", "control.switch", value="=k", cases=["gold"]),
        node("b", "control.merge"),
        edges=[edge("t", "sw"), edge("sw", "b", "bronze")],
    )
    _, diagnostics = compile_(diagram)
    assert [(d.code, d.node_id) for d in diagnostics] == [("unknown_port", "sw")]


@pytest.mark.parametrize(
    ("cases", "field"),
    [
        ("gold", "cases"),  # not a list
        (["gold", 3], "cases.1"),
        (["gold", ""], "cases.1"),
        (["gold", "gold"], "cases.1"),
        (["default"], "cases.0"),  # clashes with a static output
        (["error"], "cases.0"),  # reserved for the error port
    ],
)
def test_bad_dynamic_outputs_are_invalid_config(cases: object, field: str) -> None:
    diagram = with_trigger(node("sw", "control.switch", value="=k", cases=cases))
    graph, diagnostics = compile_(diagram)
    assert graph is None
    assert ("invalid_config", field) in [(d.code, d.field) for d in diagnostics]


def test_dynamic_outputs_from_an_expression_are_invalid() -> None:
    changed = msgspec.structs.replace(
        spec("control.switch"),
        expression_fields=("value", "cases"),
    )
    catalog = StaticCatalog([*CATALOG.all(), changed])
    diagram = with_trigger(node("sw", "control.switch", value="=k", cases="=trigger.cases"))
    graph, diagnostics = compile_diagram(diagram, catalog, ParenChecker())
    assert graph is None
    assert [(d.code, d.field) for d in diagnostics] == [("invalid_config", "cases")]


def test_on_error_error_port_adds_error_output() -> None:
    diagram = with_trigger(
        node("h", "http.request", url="https://x.test", method="GET", on_error="error_port"),
        node("ok", "control.merge"),
        node("failed", "control.merge"),
        edges=[edge("t", "h"), edge("h", "ok"), edge("h", "failed", "error")],
    )
    graph, diagnostics = compile_(diagram)
    assert diagnostics == []
    assert graph is not None
    step = graph.step("h")
    assert step.outputs == ("out", "error")
    assert step.on_error == "error_port"
    assert graph.transitions[-1] == Transition("h", "failed", "error")


def test_without_on_error_there_is_no_error_port() -> None:
    diagram = with_trigger(
        node("h", "http.request", url="https://x.test", method="GET"),
        node("failed", "control.merge"),
        edges=[edge("t", "h"), edge("h", "failed", "error")],
    )
    _, diagnostics = compile_(diagram)
    assert [(d.code, d.node_id) for d in diagnostics] == [("unknown_port", "h")]


def test_on_error_continue_has_no_error_port() -> None:
    diagram = with_trigger(node("m", "control.merge", on_error="continue"))
    graph, diagnostics = compile_(diagram)
    assert diagnostics == []
    assert graph is not None
    assert graph.step("m").on_error == "continue"
    assert graph.step("m").outputs == ("out",)
    assert graph.step("m").config == {"on_error": "continue"}


def test_node_type_with_error_port_always_has_it() -> None:
    diagram = with_trigger(
        node("r", "test.risky"),
        node("f", "control.merge"),
        edges=[edge("t", "r"), edge("r", "f", "error")],
    )
    graph, diagnostics = compile_(diagram)
    assert diagnostics == []
    assert graph is not None
    assert graph.step("r").outputs == ("out", "error")
    assert graph.step("r").on_error == "error_port"


# --- reserved keys ----------------------------------------------------------------------


def test_reserved_keys_parse_into_step_fields() -> None:
    diagram = with_trigger(
        node(
            "m",
            "control.merge",
            retry={
                "max_attempts": 5,
                "initial_interval": 0.5,
                "backoff_coefficient": 3,
                "max_interval": 60,
                "jitter": 0,
                "non_retryable_error_kinds": ["auth"],
            },
            timeout=2.5,
            join={"mode": "first"},
            on_error="fail",
        )
    )
    graph, diagnostics = compile_(diagram)
    assert ignoring_unknown_keys(diagnostics) == []
    assert graph is not None
    step = graph.step("m")
    assert step.retry == RetryPolicy(5, 0.5, 3.0, 60.0, 0.0, ("auth",))
    assert step.timeout == 2.5
    assert step.join == JoinSpec(mode="first")
    assert step.on_error == "fail"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"retry": 3}, "retry"),
        ({"retry": {"max_attempts": "3"}}, "retry.max_attempts"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"retry": {"tries": 3}}, "retry.tries"),
        ({"retry": {"jitter": 2}}, "retry.jitter"),
        ({"retry": {"backoff_coefficient": 0.5}}, "retry.backoff_coefficient"),
        ({"retry": {"initial_interval": 10, "max_interval": 5}}, "retry.max_interval"),
        ({"retry": {"non_retryable_error_kinds": [1]}}, "retry.non_retryable_error_kinds.0"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": "30"}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"timeout": 10**400}, "timeout"),
        ({"join": "all"}, "join"),
        ({"join": {"mode": "some"}}, "join.mode"),
        ({"join": {"mode": "n_of_m"}}, "join.count"),
        ({"join": {"mode": "n_of_m", "count": 3}}, "join.count"),  # only one incoming edge
        ({"join": {"count": -1}}, "join.count"),
        ({"on_error": "ignore"}, "on_error"),
    ],
)
def test_bad_reserved_keys_are_invalid_config(config: dict[str, Any], field: str) -> None:
    graph, diagnostics = compile_(with_trigger(node("m", "control.merge", **config)))
    assert graph is None
    found = [(d.code, d.node_id, d.field) for d in ignoring_unknown_keys(diagnostics)]
    assert found == [("invalid_config", "m", field)]


def test_reserved_keys_are_not_checked_against_config_schema() -> None:
    changed = msgspec.structs.replace(
        spec("control.merge"),
        config_schema={
            "type": "object",
            "properties": {"timeout": {"type": "string"}},
            "required": ["retry"],
        },
    )
    catalog = StaticCatalog([*CATALOG.all(), changed])
    graph, diagnostics = compile_diagram(
        with_trigger(node("m", "control.merge", timeout=5)), catalog, ParenChecker()
    )
    assert diagnostics == []
    assert graph is not None
    assert graph.step("m").timeout == 5.0


# --- robustness -------------------------------------------------------------------------


def test_malformed_config_schema_does_not_crash() -> None:
    changed = msgspec.structs.replace(
        spec("control.merge"),
        config_schema={"properties": ["not", "a", "dict"], "required": "nope"},
    )
    catalog = StaticCatalog([*CATALOG.all(), changed])
    graph, diagnostics = compile_diagram(
        with_trigger(node("m", "control.merge", a=1)), catalog, ParenChecker()
    )
    assert ignoring_unknown_keys(diagnostics) == []
    assert graph is not None


def test_deeply_nested_expression_field_is_reported_not_crashed() -> None:
    value: object = "=x"
    for _ in range(200):
        value = [value]
    graph, diagnostics = compile_(with_trigger(node("s", "control.set", values={"v": value})))
    assert graph is None
    assert codes(diagnostics) == ["invalid_config"]


# --- sticky notes -----------------------------------------------------------------------


def test_sticky_notes_are_left_out_of_the_graph_and_its_hash() -> None:
    plain, diagnostics = compile_(happy_diagram())
    assert plain is not None and diagnostics == []
    base = happy_diagram()
    note = Node(id="note_1", type=NOTE_TYPE, config={"text": "ask finance first"})
    noted = msgspec.structs.replace(base, nodes=[*base.nodes, note])

    graph, diagnostics = compile_(noted)

    assert diagnostics == [], "a note is neither unknown nor unreachable"
    assert graph is not None
    assert "note_1" not in [s.id for s in graph.steps]
    assert graph.content_hash == plain.content_hash


def test_edge_to_a_sticky_note_is_a_note_edge() -> None:
    note = Node(id="note_1", type=NOTE_TYPE, config={"text": "hi"})
    diagram = with_trigger(node("s", "control.set", values={"a": 1}), edges=[edge("t", "s")])
    diagram = msgspec.structs.replace(
        diagram, nodes=[*diagram.nodes, note], edges=[*diagram.edges, edge("s", "note_1")]
    )
    graph, diagnostics = compile_(diagram)
    assert graph is None
    assert [(d.code, d.edge_id) for d in diagnostics] == [("note_edge", "s.out->note_1.in")]


def test_a_note_sharing_a_node_id_is_a_duplicate() -> None:
    note = Node(id="s", type=NOTE_TYPE)
    diagram = with_trigger(node("s", "control.set", values={"a": 1}))
    diagram = msgspec.structs.replace(diagram, nodes=[*diagram.nodes, note])
    assert "duplicate_node_id" in codes(compile_(diagram)[1])
