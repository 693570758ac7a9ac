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
from typing import Any

from backend.engine.model import ChildRun, ChildSummary
from backend.engine.nodes.base import (
    CallBehaviour,
    CallFailed,
    CallProgress,
    CallSucceeded,
    CallWaiting,
    NodeError,
    NodeType,
)
from backend.engine.nodes.children import TARGET_PROPERTIES, child_error, child_failed, target
from backend.engine.states import RunStatus
from designer_schema.catalog import NodeTypeSpec

SPEC = NodeTypeSpec(
    type="control.foreach",
    label="For each",
    kind="control",
    category="Flow",
    icon="repeat",
    description="Runs a body workflow once per list item; outputs the results in item order.",
    config_schema={
        "type": "object",
        "properties": {
            "items": {"title": "Items", "description": "A list, e.g. =body.orders"},
            **TARGET_PROPERTIES,
            "wait": {"type": "boolean", "default": True, "title": "Wait for all items"},
            "concurrency": {"type": "integer", "default": 1, "minimum": 1, "title": "Concurrency"},
            "on_item_error": {
                "type": "string",
                "enum": ["stop", "continue"],
                "x-enum-labels": {"stop": "Stop", "continue": "Continue with the next items"},
                "default": "stop",
                "title": "On item error",
            },
        },
        "required": ["items", "workflow_id"],
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

    def start(self, config: dict[str, Any], data: Any) -> dict[str, Any]:
        call = target(config)
        items = config.get("items")
        if not isinstance(items, list):
            raise NodeError(
                f"items must be a list, got {type(items).__name__}",
                kind="invalid_config",
                field="items",
            )
        concurrency = config.get("concurrency") or 1
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise NodeError(
                f"concurrency must be an integer >= 1, got {concurrency!r}",
                kind="invalid_config",
                field="concurrency",
            )
        call["items"] = items
        call["concurrency"] = concurrency
        call["on_item_error"] = config.get("on_item_error") or "stop"
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
