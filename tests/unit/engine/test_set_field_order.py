"""The Set keeps its fields in the order they were given (an ordered field list), reads the
older object form unchanged, and the compiler names unnamed and repeated entries."""

from __future__ import annotations

import msgspec

from backend.engine.expressions import JsonataChecker
from backend.engine.states import RunStatus
from designer_schema.compiler import compile_diagram
from designer_schema.diagram import Diagram
from designer_schema.ordered_fields import entry_problems, field_entries
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import CATALOG, compile_dict, run_graph

ORDERED = [
    {"name": "zeta", "value": "=qty * price"},
    {"name": "id", "value": "=sku"},
    {"name": "a", "value": "fixed"},
    {"name": "missing", "value": "=nothing.here"},
]


def _set_diagram(mapping: object) -> dict[str, object]:
    return diagram(
        [node("start", "trigger.manual"), node("shape", "control.set", mapping=mapping)],
        [edge("start", "shape")],
    )


def test_output_keys_follow_the_list_order() -> None:
    state, _ = run_graph(compile_dict(_set_diagram(ORDERED)), {"qty": 2, "price": 5, "sku": "S"})
    assert state.status == RunStatus.SUCCEEDED
    # an expression that matched nothing is left out, as in the object form
    assert list(state.output.items()) == [("zeta", 10), ("id", "S"), ("a", "fixed")]


def test_object_form_still_runs_in_its_own_order() -> None:
    mapping = {"zeta": "=qty", "id": "=sku"}
    state, _ = run_graph(compile_dict(_set_diagram(mapping)), {"qty": 2, "sku": "S"})
    assert list(state.output.items()) == [("zeta", 2), ("id", "S")]


def test_expression_paths_name_the_entry() -> None:
    graph = compile_dict(_set_diagram(ORDERED))
    step = next(s for s in graph.steps if s.id == "shape")
    assert step.expressions == {
        "mapping.0.value": "qty * price",
        "mapping.1.value": "sku",
        "mapping.3.value": "nothing.here",
    }


def test_unnamed_and_repeated_entries_are_config_errors() -> None:
    mapping = [{"name": "a", "value": 1}, {"name": "", "value": 2}, {"name": "a", "value": 3}]
    _, diagnostics = compile_diagram(
        msgspec.convert(_set_diagram(mapping), Diagram), CATALOG, JsonataChecker()
    )
    found = {(d.code, d.field) for d in diagnostics if d.node_id == "shape"}
    assert ("invalid_config", "mapping.1") in found
    assert ("invalid_config", "mapping.2.name") in found


def test_field_entries_of_both_forms() -> None:
    assert field_entries({"b": 1, "a": 2}) == [("b", 1, "b"), ("a", 2, "a")]
    assert field_entries([{"name": "b", "value": 1}]) == [("b", 1, "0.value")]
    assert field_entries("nope") is None
    assert entry_problems({"a": 1}) == []
