"""A workflow through the item-list nodes, run by a real worker: join people and orders,
split out their lines, remove duplicates, rename keys, limit, then hash the result."""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import httpx
import msgspec
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, start_manual, steps_by_id

pytestmark = pytest.mark.integration

PEOPLE = [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Bob"}]
ORDERS = [
    {"person": 1, "lines": [{"sku": "a"}, {"sku": "b"}]},
    {"person": 1, "lines": [{"sku": "a"}]},
    {"person": 3, "lines": [{"sku": "z"}]},
]


async def test_a_workflow_through_the_item_list_nodes(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    nodes = [
        node("start", "trigger.manual"),
        node(
            "join",
            "data.merge",
            left="=$trigger.people",
            right="=$trigger.orders",
            mode="join",
            left_key="id",
            right_key="person",
            join_type="inner",
        ),
        node("lines", "data.split_out", field="lines", include="other_fields", destination="line"),
        node("unique", "data.remove_duplicates", fields=["name", "line.sku"]),
        node("renamed", "data.rename_keys", renames=[{"from": "line.sku", "to": "sku"}]),
        node("first", "data.limit", max_items=2),
        node("digest", "data.crypto", value="=$steps.first.items"),
    ]
    order = ["start", "join", "lines", "unique", "renamed", "first", "digest"]
    edges = [edge(a, b) for a, b in itertools.pairwise(order)]
    wf = await publish(client, diagram(nodes, edges))
    run_id = await start_manual(client, wf, {"people": PEOPLE, "orders": ORDERS})
    assert await wait_for_run(runtime, run_id, timeout=30) == "succeeded"
    steps = steps_by_id(await run_detail(client, run_id))
    assert steps["join"]["output"]["count"] == 2
    assert steps["lines"]["output"]["count"] == 3
    assert steps["unique"]["output"]["removed"] == 1
    expected = [
        {"id": 1, "name": "Ada", "person": 1, "line": {}, "sku": "a"},
        {"id": 1, "name": "Ada", "person": 1, "line": {}, "sku": "b"},
    ]
    assert steps["first"]["output"] == {"items": expected, "count": 2, "dropped": 0}
    canonical = msgspec.json.encode(expected, order="sorted")
    assert steps["digest"]["output"]["value"] == hashlib.sha256(canonical).hexdigest()
