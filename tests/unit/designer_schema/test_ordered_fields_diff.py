"""The diff walks ordered field lists (the Set's Fields) by name, against the list and the
older object form, and names a change of order."""

from __future__ import annotations

from typing import Any

from designer_schema.diagram import Node, Position
from designer_schema.diff import node_fields


def _set(mapping: Any) -> Node:
    return Node(id="s", type="control.set", position=Position(0, 0), config={"mapping": mapping})


def _changes(before: Any, after: Any) -> list[tuple[str, str]]:
    return [(c.path, c.kind) for c in node_fields(_set(before), _set(after))]


def test_fields_compared_by_name() -> None:
    before = [{"name": "a", "value": 1}, {"name": "b", "value": "=x"}]
    after = [{"name": "a", "value": 2}, {"name": "b", "value": "=x"}, {"name": "c", "value": 3}]
    assert _changes(before, after) == [
        ("config.mapping.a", "changed"),
        ("config.mapping.c", "added"),
    ]


def test_object_form_against_the_list_form() -> None:
    assert _changes({"a": 1, "b": 2}, [{"name": "a", "value": 1}, {"name": "b", "value": 2}]) == []
    assert _changes({"a": 1}, [{"name": "a", "value": 5}]) == [("config.mapping.a", "changed")]


def test_a_new_order_is_a_change_of_the_list() -> None:
    before = [{"name": "a", "value": 1}, {"name": "b", "value": 2}]
    after = [{"name": "b", "value": 2}, {"name": "a", "value": 1}]
    assert _changes(before, after) == [("config.mapping", "changed")]
