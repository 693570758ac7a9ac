"""Whether a graph can observe a field of its run input (backend/engine/input_reads.py).

A ``False`` answer lets the store leave a For-each child's ``input`` (the parent's whole
list) unread, so it must be ``False`` only where no step could see the field."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from backend.engine.input_reads import reads_input_field
from tests.diagrams import diagram, edge, node
from tests.unit.engine.driver import compile_dict


def body(*steps: dict[str, Any], trigger: str = "trigger.manual") -> Any:
    """``start`` (a ``trigger``) -> each of ``steps`` in a chain."""
    nodes = [node("start", trigger), *steps]
    edges = [edge(a["id"], b["id"]) for a, b in itertools.pairwise(nodes)]
    return compile_dict(diagram(nodes, edges))


def set_step(step_id: str, keep_input: bool = False, **mapping: str) -> dict[str, Any]:
    config: dict[str, Any] = {"mapping": mapping}
    if keep_input:
        config["keep_input"] = True
    return node(step_id, "control.set", **config)


BLIND = (
    "=item.n * 2",
    "=index",
    "=$.item.n",
    "=$$.item",
    '="Order " & item.id',
    "=$string(item.n)",
    "=$substringBefore(item.s, '-')",
    '={"n": item.n, "list": [index, 1]}',
    '=item.n > 1 ? "big" : "small"',
    "=(item.n)",
    "=$run.id",
    "=$trigger.item.n",
    "=$steps.start.index",
)
"""Expressions of the Set right after the trigger that cannot see ``input``."""

SEEING = (
    "=input",
    "=input.items",
    "=$count(input.items)",
    "=$",
    "=$$",
    "=$.input",
    "=$string()",  # the context (the whole input) fills the missing parameter
    "=$substringBefore(item.s)",  # likewise, for the first parameter
    "=$keys($)",
    "=$lookup($, 'input')",
    "=*",
    "=**.n",
    "=item@$x.input",  # a focus binding: ".input" is read from the trigger output
    "=item[n > 1]",
    "=$trigger",
    "=$trigger.input",
    "=$steps.start",
    "=$steps.start.input",
    "=$steps",
    "=$eval('input')",
    "=($x := input; $x)",
)
"""Expressions that may see it (or that the rule does not look into)."""


@pytest.mark.parametrize(
    ("expression", "reads"), [(e, False) for e in BLIND] + [(e, True) for e in SEEING]
)
def test_a_set_right_after_the_trigger_reads_input_only_through_its_names(
    expression: str, reads: bool
) -> None:
    assert reads_input_field(body(set_step("shape", x=expression)), "input") is reads


def test_a_later_step_may_read_only_through_trigger_and_steps() -> None:
    safe = body(set_step("shape", n="=item.n"), set_step("after", x="=$steps.start.item"))
    assert reads_input_field(safe, "input") is False
    for expression in ("=$trigger.input", "=$steps.start", "=$eval('$trigger')"):
        graph = body(set_step("shape", n="=item.n"), set_step("after", x=expression))
        assert reads_input_field(graph, "input") is True, expression
    # the later step's own input is the Set's output: its names are not the run input's
    later = body(set_step("shape", n="=item.n"), set_step("after", x="=input"))
    assert reads_input_field(later, "input") is False


def test_steps_that_pass_the_input_on_read_it() -> None:
    kept = body(set_step("shape", keep_input=True, n="=item.n"))
    assert reads_input_field(kept, "input") is True
    action = body(node("call", "test.action"))
    assert reads_input_field(action, "input") is True
    branch = body(node("check", "control.if", condition="=item.n > 1"))
    assert reads_input_field(branch, "input") is True
    after_set = body(set_step("shape", n="=item.n"), node("call", "test.action"))
    assert reads_input_field(after_set, "input") is False


def test_a_trigger_that_checks_its_input_or_is_the_output_reads_it() -> None:
    assert reads_input_field(body(trigger="trigger.manual"), "input") is True  # the output
    webhook = body(set_step("shape", n="=body.n"), trigger="trigger.webhook")
    assert reads_input_field(webhook, "body") is True


def test_the_answer_is_per_field() -> None:
    graph = body(set_step("shape", n="=item.n"))
    assert reads_input_field(graph, "input") is False
    assert reads_input_field(graph, "item") is True
