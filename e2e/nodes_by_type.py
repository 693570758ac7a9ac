"""Helpers driving the designer by node type (Playwright sync API): drop a node from the
palette, find it, wire its ports with the mouse, open its config form; read a run step's
input/output blocks. For workflows with one node of each type (ids are read back from the
canvas)."""

from __future__ import annotations

import time
from typing import Any

WEBHOOK = "trigger.webhook"
SET = "control.set"
IF = "control.if"
HTTP = "http.request"
RESPOND = "control.respond"

# Where each node is dropped: node centres as fractions of the canvas' width and height
# (nodes are 200 px wide at zoom 1; the canvas is about 800 x 840 px at 1440 x 900).
DROP_POSITIONS = {
    WEBHOOK: (0.17, 0.13),
    SET: (0.47, 0.13),
    IF: (0.77, 0.13),
    HTTP: (0.47, 0.36),
    RESPOND: (0.77, 0.36),
}


def node(page: Any, node_type: str) -> Any:
    """The canvas node of ``node_type`` (a Playwright locator)."""
    return page.locator(f'#canvas g.node[data-type="{node_type}"]')


def node_id(page: Any, node_type: str) -> str:
    """The id of the canvas node of ``node_type``."""
    value = node(page, node_type).get_attribute("data-node-id")
    assert value, f"node of type {node_type} has no data-node-id"
    return value


def center(locator: Any) -> tuple[float, float]:
    """Centre of the element, waiting while the canvas redraws (after each compile the
    designer re-renders the SVG, so an element may be replaced between lookup and measure)."""
    deadline = time.monotonic() + 10
    while True:
        locator.wait_for(state="visible", timeout=10_000)
        box = locator.bounding_box()
        if box is not None:
            return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        assert time.monotonic() < deadline, f"{locator} is not visible"
        time.sleep(0.05)


def drag_from_palette(page: Any, node_type: str) -> None:
    """Drag ``node_type`` from the palette onto the canvas at its :data:`DROP_POSITIONS` place."""
    before = node(page, node_type).count()
    canvas = page.locator("#canvas")
    box = canvas.bounding_box()
    assert box and box["width"] >= 700, f"canvas too small for the layout: {box}"
    fx, fy = DROP_POSITIONS[node_type]
    item = page.locator(f'.palette-item[data-type="{node_type}"]')
    item.scroll_into_view_if_needed()
    # A real mouse drag (HTML5 drag and drop), dropped at the given point of the canvas.
    item.drag_to(canvas, target_position={"x": box["width"] * fx, "y": box["height"] * fy})
    page.wait_for_function(
        '([t, n]) => document.querySelectorAll(`#canvas g.node[data-type="${t}"]`).length > n',
        arg=[node_type, before],
    )


def connect(page: Any, source_type: str, source_port: str, target_type: str) -> None:
    """Drag with the mouse from an output port to the target's input port."""
    edges_before = page.locator("#canvas path.edge").count()
    out_port = node(page, source_type).locator(f'circle.port.port-out[data-port="{source_port}"]')
    in_port = node(page, target_type).locator('circle.port.port-in[data-port="in"]')
    sx, sy = center(out_port)
    tx, ty = center(in_port)
    page.mouse.move(sx, sy)
    page.mouse.down()
    page.mouse.move((sx + tx) / 2, (sy + ty) / 2 + 20, steps=8)
    page.mouse.move(tx, ty, steps=8)
    page.mouse.up()
    page.wait_for_function(
        "n => document.querySelectorAll('#canvas path.edge').length > n", arg=edges_before
    )


def select_node(page: Any, node_type: str) -> Any:
    """Click the node's body; returns the loaded config form of that node."""
    nid = node_id(page, node_type)
    # Near the top edge, away from the label, icon and error badge drawn over the body.
    node(page, node_type).locator("rect.node-body").click(position={"x": 110, "y": 5})
    form = page.locator(f'#config-panel form.config-form[data-node-id="{nid}"]')
    form.wait_for()
    return form


def io_block(step_section: Any, name: str) -> Any:
    """The <details> of a run step named ``name`` ("Input", "Output" or "Error")."""
    return step_section.locator(f"details.io:has(> summary:text-is('{name}'))")
