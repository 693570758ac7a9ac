"""The diff of a wide workflow: each side fits its graph but never below the zoom where
labels are drawn, and a click on a change zooms both sides to that node.
Screenshots: diff-readable.png, diff-focused.png."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from e2e.api_client import api_client, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login

pytestmark = pytest.mark.e2e

WIDTH = 24  # steps in a row: fitted whole, far below the label threshold


def _chain(total: str) -> dict[str, Any]:
    nodes = [node("start", "trigger.manual", 0)]
    for i in range(WIDTH):
        nodes.append(
            node(f"s{i}", "control.set", 300 * (i + 1), mapping=[{"name": "n", "value": i}])
        )
    nodes[-1]["config"]["mapping"] = [{"name": "total", "value": total}]
    edges = [
        {"id": f"e{i}", "source": a["id"], "target": b["id"]}
        for i, (a, b) in enumerate(itertools.pairwise(nodes))
    ]
    return {"nodes": nodes, "edges": edges, "schema_version": 1}


def test_each_side_readable_and_a_change_zoomed_to(
    page: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    api = api_client(server)
    wf = api.create_workflow("Wide").id
    for total in ("=n * 2", "=n * 3"):
        api.save_draft(wf, _chain(total))
        api.publish(wf)
    login(page, server)
    page.goto(f"{server.base_url}/workflows/{wf}/compare?from=1&to=2")
    page.wait_for_function("() => window.railyardDiff !== undefined")
    page.wait_for_timeout(300)  # the fit after layout
    zooms = page.evaluate("() => window.railyardDiff.canvases.map((c) => c.model.viewport.zoom)")
    assert all(z >= 0.45 for z in zooms), zooms
    for side in ("#diff-before", "#diff-after"):
        assert page.locator(f"{side} text.node-label").count() > 0, side
    changed = f'#diff-after .node[data-node-id="s{WIDTH - 1}"]'
    assert page.locator(changed).is_visible()
    page.screenshot(path=str(ARTIFACTS_DIR / "diff-readable.png"))

    page.locator(f'#change-list [data-focus-node="s{WIDTH - 1}"]').first.click()
    zooms = page.evaluate("() => window.railyardDiff.canvases.map((c) => c.model.viewport.zoom)")
    assert all(z >= 1 for z in zooms), zooms
    for side in ("#diff-before", "#diff-after"):
        svg = page.locator(side).bounding_box()
        box = page.locator(
            f'{side} .node[data-node-id="s{WIDTH - 1}"] rect.node-body'
        ).bounding_box()
        assert svg and box
        middle = box["x"] + box["width"] / 2
        assert abs(middle - (svg["x"] + svg["width"] / 2)) < 5, (side, box, svg)
    page.screenshot(path=str(ARTIFACTS_DIR / "diff-focused.png"))
