"""``control.subworkflow``: runs another workflow as a child run (see
:mod:`backend.engine.nodes.children`).

Config: ``workflow_id``; ``version`` (a pinned number, or empty for the active version);
``wait`` (default true: the step ends when the child ends, with the child's output; a
failed child fails the step with the child's error message and ``child_run_id``; false:
fire and forget, the step succeeds at once with ``{"run_id": child}``); ``input``
(default: the step input).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.engine.model import ChildRun, ChildSummary
from backend.engine.nodes.base import (
    CallBehaviour,
    CallFailed,
    CallProgress,
    CallSucceeded,
    CallWaiting,
    NodeType,
)
from backend.engine.nodes.children import TARGET_PROPERTIES, child_error, child_failed, target
from designer_schema.catalog import NodeTypeSpec

SPEC = NodeTypeSpec(
    type="control.subworkflow",
    label="Sub-workflow",
    kind="control",
    category="Flow",
    icon="workflow",
    description="Runs another workflow as a child run; waits for it or fires and forgets.",
    config_schema={
        "type": "object",
        "properties": {
            **TARGET_PROPERTIES,
            "wait": {"type": "boolean", "default": True, "title": "Wait for completion"},
            "input": {"title": "Input", "description": "Child input; empty sends the step input"},
        },
        "required": ["workflow_id"],
        # what the child run receives (designer_schema.dataflow: shown in the panel)
        "x-child-input": {"x-field-or-input": "input"},
    },
    expression_fields=("input",),
    output_schema={
        "description": "Waiting: the child run's output. Fire and forget: {run_id}.",
    },
)


class Subworkflow(CallBehaviour):
    """One child run (index 0)."""

    def start(self, config: dict[str, Any], data: Any) -> dict[str, Any]:
        call = target(config)
        child_input = config.get("input")
        call["input"] = data if child_input is None else child_input
        return call

    def forget(self, call: Mapping[str, Any], data: Any) -> list[Any]:
        return [call.get("input")]

    def forgotten_output(self, run_ids: list[str]) -> Any:
        return {"run_id": run_ids[0]}

    def progress(
        self,
        call: Mapping[str, Any],
        data: Any,
        children: Mapping[int, ChildRun],
        requested: frozenset[int],
        summary: ChildSummary | None = None,
    ) -> CallProgress:
        child = children.get(0)
        if child is None:
            return CallWaiting(() if requested else ((0, call.get("input")),))
        if child.status == "succeeded":
            return CallSucceeded(child.output, {"child_run_id": child.run_id})
        if child_failed(child.status):
            return CallFailed(child_error(child))
        return CallWaiting()


NODE = NodeType(SPEC, Subworkflow())
