"""The diff of a workflow of five steps in a row fits whole on each side at 1280x800 with
its labels drawn; the diff of a wide one shows its first change at the zoom where labels
are still drawn, and a click on a change zooms both sides to that node.
Screenshots: diff-fits.png, diff-readable.png, diff-focused.png."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from e2e.api_client import api_client, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login

pytestmark = pytest.mark.e2e

WIDTH = 24  # steps in a row: fitted whole, far below the label threshold


def _chain(total: str, width: int = WIDTH) -> dict[str, Any]:
    nodes = [node("start", "trigger.manual", 0)]
    for i in range(width):
        nodes.append(
            node(f"s{i}", "control.set", 300 * (i + 1), mapping=[{"name": "n", "value": i}])
        )
    nodes[-1]["config"]["mapping"] = [{"name": "total", "value": total}]
    edges = [
        {"id": f"e{i}", "source": a["id"], "target": b["id"]}
        for i, (a, b) in enumerate(itertools.pairwise(nodes))
    ]
    return {"nodes": nodes, "edges": edges, "schema_version": 1}


# Per side: its zoom and how many of its nodes lie whole inside it.
SIDES = """() => window.railyardDiff.canvases.map((c) => {
  const box = c.svg.getBoundingClientRect();
  const inside = [...c.svg.querySelectorAll('.node rect.node-body')].filter((r) => {
    const b = r.getBoundingClientRect();
    return b.left >= box.left && b.right <= box.right && b.top >= box.top && b.bottom <= box.bottom;
  });
  return { zoom: c.model.viewport.zoom, inside: inside.length, nodes: c.model.nodes.length };
})"""


def _versions(api: Any, name: str, width: int) -> str:
    wf = api.create_workflow(name).id
    for total in ("=n * 2", "=n * 3"):
        api.save_draft(wf, _chain(total, width))
        api.publish(wf)
    return str(wf)


def test_each_side_readable_and_a_change_zoomed_to(
    page: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    api = api_client(server)
    wf = _versions(api, "Wide", WIDTH)
    five = _versions(api, "Five in a row", 4)
    login(page, server)

    # five steps in a row: each side shows all of them, labels drawn
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server.base_url}/workflows/{five}/compare?from=1&to=2")
    page.wait_for_function("() => window.railyardDiff !== undefined")
    page.wait_for_timeout(300)  # the fit after layout
    for side in page.evaluate(SIDES):
        assert side["inside"] == side["nodes"] == 5 and side["zoom"] >= 0.45, side
    assert page.locator("#diff-after text.node-label").count() == 5
    page.screenshot(path=str(ARTIFACTS_DIR / "diff-fits.png"))
    page.set_viewport_size({"width": 1440, "height": 900})

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
