"""``control.foreach``: runs a body workflow once per list item, as child runs (see
:mod:`backend.engine.nodes.children`).

Config: ``items`` (a list, usually an expression); ``workflow_id`` and ``version`` of the
body workflow; ``concurrency`` (children running at once, default 1); ``on_item_error``:
``stop`` (default; the first failed item fails the step and cancels unfinished items) or
``continue`` (the failed item's result is ``{"error": ...}``). Each child's input is
``{"item": value, "index": i, "input": step input}``. Output: the list of the children's
outputs in item order. An empty list runs nothing and outputs ``[]``. With ``wait`` false
every item's child starts at once (no concurrency limit, no synchronisation) and the step
succeeds with ``{"run_ids": [...]}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

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
from backend.engine.states import RunStatus
from designer_schema.catalog import NodeTypeSpec


class ForeachConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``items`` (a list), the body's ``workflow_id`` and ``version``, ``wait``,
    ``concurrency`` (>= 1) and ``on_item_error``."""

    items: Annotated[
        list[Any], msgspec.Meta(title="Items", description="A list, e.g. =body.orders")
    ]
    workflow_id: WorkflowId
    version: PinnedVersion = None
    wait: Annotated[bool, msgspec.Meta(title="Wait for all items")] = True
    concurrency: Annotated[int, msgspec.Meta(ge=1, title="Concurrency")] = 1
    on_item_error: Annotated[
        Literal["stop", "continue"],
        msgspec.Meta(
            title="On item error",
            extra_json_schema={
                "x-enum-labels": {"stop": "Stop", "continue": "Continue with the next items"}
            },
        ),
    ] = "stop"


SPEC = NodeTypeSpec(
    type="control.foreach",
    label="For each",
    kind="control",
    category="Flow",
    icon="repeat",
    description="Runs a body workflow once per list item; outputs the results in item order.",
    config_schema={
        **config_schema(ForeachConfig),
        # what each child run receives (designer_schema.dataflow: shown in the panel)
        "x-child-input": {
            "type": "object",
            "properties": {
                "item": {"x-item-of": "items"},
                "index": {"type": "integer"},
                "input": {"x-step-input": True},
            },
            "required": ["item", "index", "input"],
        },
    },
    expression_fields=("items",),
    output_schema={
        "description": (
            "Waiting: the body runs' outputs in item order ({error} for a failed item with "
            "on_item_error continue). Fire and forget: {run_ids}."
        ),
        "type": ["array", "object"],
    },
)


def _child_input(item: Any, index: int, data: Any) -> dict[str, Any]:
    return {"item": item, "index": index, "input": data}


class Foreach(CallBehaviour):
    """One child run per item, at most ``concurrency`` unfinished at once."""

    config_type = ForeachConfig

    def start(self, config: ForeachConfig, data: Any) -> dict[str, Any]:
        call = target(config.workflow_id, config.version, config.wait)
        call["items"] = config.items
        call["concurrency"] = config.concurrency
        call["on_item_error"] = config.on_item_error
        return call

    def forget(self, call: Mapping[str, Any], data: Any) -> list[Any]:
        return [_child_input(item, i, data) for i, item in enumerate(call["items"])]

    def forgotten_output(self, run_ids: list[str]) -> Any:
        return {"run_ids": run_ids}

    def children_total(self, call: Mapping[str, Any]) -> int:
        return len(call.get("items") or [])

    def progress(
        self,
        call: Mapping[str, Any],
        data: Any,
        children: Mapping[int, ChildRun],
        requested: frozenset[int],
        summary: ChildSummary | None = None,
    ) -> CallProgress:
        items: list[Any] = call.get("items") or []
        failed = sorted(i for i, c in children.items() if child_failed(c.status))
        if failed and call.get("on_item_error", "stop") == "stop":
            cancel = tuple(c.run_id for c in children.values() if not RunStatus(c.status).terminal)
            error = child_error(children[failed[0]])
            error["kind"] = "item_failed"
            error["index"] = failed[0]
            return CallFailed(error, cancel)
        unlisted = summary.succeeded if summary is not None else 0
        done = unlisted + sum(1 for c in children.values() if RunStatus(c.status).terminal)
        if done == len(items) and not unlisted:
            results = [
                {"error": child_error(children[i])} if i in failed else children[i].output
                for i in range(len(items))
            ]
            return CallSucceeded(results, {"items": len(items), "failed": len(failed)})
        active = unlisted + len(children) - done + len(requested)
        limit = int(call.get("concurrency") or 1)
        start: list[tuple[int, Any]] = []
        # every index below next_index has its child (children start in index order)
        first = summary.next_index if summary is not None else 0
        for index in range(first, len(items)):
            item = items[index]
            if active >= limit:
                break
            if index in children or index in requested:
                continue
            start.append((index, _child_input(item, index, data)))
            active += 1
        return CallWaiting(tuple(start))


NODE = NodeType(SPEC, Foreach())
