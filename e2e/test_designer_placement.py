"""New nodes never land on top of others, however they are added.

A person clicks palette items (each lands in the middle of the view, the second one next
to the first, not on it), adds a sticky note, quick-adds after an If's ``true`` port and
then clicks its ``false`` port (still free to click) to quick-add there too, drops a
palette node on an edge (it goes into the edge and the nodes after it move right),
duplicates, pastes at the pointer, pastes with the pointer off the canvas (the middle
of the view) and pastes a whole exported workflow onto the busiest spot. After every step
no two node rectangles overlap. Screenshots:
designer-placement-*.png.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import (
    body_point,
    connect,
    diagram,
    edge_point,
    new_workflow,
    node_el,
    overlapping_nodes,
    port_center,
    press,
    wait_saved,
)

pytestmark = pytest.mark.e2e


def _no_overlap(page: Any, step: str) -> None:
    pairs = overlapping_nodes(page)
    assert not pairs, f"after {step}: overlapping nodes {pairs}"


def _count(page: Any, n: int) -> None:
    page.wait_for_function(f"() => window.railyardDesigner.model.nodes.length === {n}")


def _box(locator: Any, timeout: float = 10.0) -> dict[str, float] | None:
    """``locator``'s bounding box once it has one: the canvas redraws a node when a check
    of the draft answers, and a box asked for while its element is replaced is ``None``."""
    deadline = time.monotonic() + timeout
    while True:
        box = locator.bounding_box()
        if box is not None or time.monotonic() > deadline:
            return box  # type: ignore[no-any-return]
        time.sleep(0.05)


def _new_of_type(page: Any, before: set[str], node_type: str) -> dict[str, Any]:
    return next(
        n for n in diagram(page)["nodes"] if n["type"] == node_type and n["id"] not in before
    )


def _quick_add(page: Any, query: str) -> None:
    page.locator(".quick-add").wait_for()
    page.keyboard.type(query)
    page.keyboard.press("Enter")


def test_every_way_of_adding_finds_free_space(page: Any, railyard_server: RailyardServer) -> None:
    page.context.grant_permissions(
        ["clipboard-read", "clipboard-write"], origin=railyard_server.base_url
    )
    login(page, railyard_server)
    workflow_id = new_workflow(page, railyard_server, "Placement")

    # Palette clicks: all in the middle of the view, none on another.
    for i, node_type in enumerate(("trigger.manual", "control.set", "control.if"), start=1):
        page.locator(f'.palette-item[data-type="{node_type}"]').click()
        _count(page, i)
        _no_overlap(page, f"palette click {node_type}")
    page.locator("#note-btn").click()
    _count(page, 4)
    _no_overlap(page, "note")
    ids = {n["type"]: n["id"] for n in diagram(page)["nodes"]}
    press(page, "0")
    connect(page, ids["trigger.manual"], "out", ids["control.set"])
    connect(page, ids["control.set"], "out", ids["control.if"])
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-placement-palette.png"))

    # Quick-add from the If's true port, then its false port: still clickable. The If is
    # first panned to the view's right edge: the new node goes right of it, so the view
    # must follow it.
    check = ids["control.if"]
    view, box = page.locator("#canvas").bounding_box(), node_el(page, check).bounding_box()
    assert view and box
    shift = view["x"] + view["width"] - 30 - (box["x"] + box["width"])
    page.evaluate(
        "dx => { const m = window.railyardDesigner.model;"
        " m.setViewport({ x: m.viewport.x + dx }); }",
        shift,
    )
    page.mouse.click(*port_center(page, check, "out", "true"))
    _quick_add(page, "delay")
    _count(page, 5)
    _no_overlap(page, "quick-add on true")
    # ... and in view (the view pans when it would land past the canvas's edge)
    added = _new_of_type(page, set(ids.values()), "control.delay")["id"]
    box = _box(node_el(page, added))
    assert box and view["x"] <= box["x"] and box["x"] + box["width"] <= view["x"] + view["width"]
    fx, fy = port_center(page, check, "out", "false")
    hit = page.evaluate(
        "([x, y]) => { const h = document.elementFromPoint(x, y);"
        " return h && h.classList.contains('port-out') ? h.dataset.port : null; }",
        [fx, fy],
    )
    assert hit == "false", "the If's false port is covered"
    page.mouse.click(fx, fy)
    _quick_add(page, "stop")
    _count(page, 6)
    _no_overlap(page, "quick-add on false")
    d = diagram(page)
    ports = {e["source_port"] for e in d["edges"] if e["source"] == check}
    assert ports == {"true", "false"}

    # Drop a palette node on the Set -> If edge: inserted, the If and its branches move right.
    press(page, "0")
    edge = next(e for e in d["edges"] if e["source"] == ids["control.set"] and e["target"] == check)
    before_x = {n["id"]: n["position"]["x"] for n in d["nodes"]}
    ex, ey = edge_point(page, edge["id"])
    box = page.locator("#canvas").bounding_box()
    assert box
    existing = {n["id"] for n in d["nodes"]}
    page.locator('.palette-item[data-type="data.template"]').drag_to(
        page.locator("#canvas"), target_position={"x": ex - box["x"], "y": ey - box["y"]}
    )
    _count(page, 7)
    _no_overlap(page, "insert on edge")
    inserted = _new_of_type(page, existing, "data.template")
    d = diagram(page)
    pairs = {(e["source"], e["target"]) for e in d["edges"]}
    assert (ids["control.set"], inserted["id"]) in pairs and (inserted["id"], check) in pairs
    after_x = {n["id"]: n["position"]["x"] for n in d["nodes"]}
    assert after_x[check] > before_x[check], "the If moved right to make room"
    assert after_x[ids["trigger.manual"]] == before_x[ids["trigger.manual"]]
    set_node = next(n for n in d["nodes"] if n["id"] == ids["control.set"])
    assert set_node["position"]["x"] < inserted["position"]["x"] < after_x[check]
    press(page, "0")
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-placement-insert.png"))

    # Duplicate, copy and paste at the pointer, paste with the pointer off the canvas.
    page.mouse.click(*body_point(page, check))
    press(page, "Control+d")
    _count(page, 8)
    _no_overlap(page, "duplicate")
    page.mouse.click(*body_point(page, check))
    press(page, "Control+c")
    page.wait_for_function("() => /Copied/.test(document.getElementById('status').textContent)")
    canvas_box = page.locator("#canvas").bounding_box()
    assert canvas_box
    target = (canvas_box["x"] + 60, canvas_box["y"] + canvas_box["height"] - 120)
    page.mouse.move(*target)
    press(page, "Control+v")
    _count(page, 9)
    _no_overlap(page, "paste at the pointer")
    pasted = page.evaluate("() => [...window.railyardDesigner.canvas.sel.nodes][0]")
    pb = _box(node_el(page, pasted).locator("rect.node-body"))
    assert pb and abs(pb["x"] - target[0]) < 120, (pb, target)
    page.mouse.move(5, 5)  # over the navigation, off the canvas
    page.evaluate("() => window.railyardDesigner.canvas.zoomAt(1)")
    press(page, "Control+v")
    _count(page, 10)
    _no_overlap(page, "paste in the middle of the view")
    pasted = page.evaluate("() => [...window.railyardDesigner.canvas.sel.nodes][0]")
    assert node_el(page, pasted).is_visible()
    press(page, "0")
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-placement-paste.png"))

    # An exported workflow pasted over the busiest spot: its nodes land as one block,
    # clear of all ten nodes there.
    press(page, "Control+s")
    wait_saved(page)
    export = page.evaluate(
        "id => fetch(`/api/v1/workflows/${id}/export`).then((r) => r.text())", workflow_id
    )
    page.evaluate("text => navigator.clipboard.writeText(text)", export)
    page.mouse.move(*body_point(page, check))
    press(page, "Control+v")
    _count(page, 20)
    _no_overlap(page, "pasting an exported workflow")
    page.wait_for_function(
        "() => /Pasted 10 nodes/.test(document.getElementById('status').textContent)"
    )
    press(page, "0")
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-placement-import.png"))
