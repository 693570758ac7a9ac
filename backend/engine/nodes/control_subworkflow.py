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
from typing import Annotated, Any

import msgspec

from backend.engine.model import ChildRun, ChildSummary
from backend.engine.nodes.base import (
    CallBehaviour,
    CallFailed,
    CallProgress,
    CallSucceeded,
    CallWaiting,
    NodeType,
)
from backend.engine.nodes.children import (
    PinnedVersion,
    WorkflowId,
    child_error,
    child_failed,
    target,
)
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec


class SubworkflowConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``workflow_id``, ``version`` (``None``: the active one), ``wait`` and ``input``
    (any JSON value; unset: the step input)."""

    workflow_id: WorkflowId
    version: PinnedVersion = None
    wait: Annotated[bool, msgspec.Meta(title="Wait for completion")] = True
    input: (
        Annotated[
            Any, msgspec.Meta(title="Input", description="Child input; empty sends the step input")
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET


SPEC = NodeTypeSpec(
    type="control.subworkflow",
    label="Sub-workflow",
    kind="control",
    category="Flow",
    icon="workflow",
    description="Runs another workflow as a child run; waits for it or fires and forgets.",
    config_schema={
        **config_schema(SubworkflowConfig),
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

    config_type = SubworkflowConfig

    def start(self, config: SubworkflowConfig, data: Any) -> dict[str, Any]:
        call = target(config.workflow_id, config.version, config.wait)
        given = config.input
        call["input"] = data if given is None or given is msgspec.UNSET else given
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
