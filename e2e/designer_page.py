"""Helpers driving the designer page with the mouse and keyboard (Playwright sync API)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from e2e.conftest import RailyardServer

DIAGRAM = (
    "() => { const d = window.railyardDesigner.model.toJSON();"
    " return {nodes: d.nodes, edges: d.edges}; }"
)
"""JS: the designer's nodes and edges (no viewport)."""

SELECTED = "() => [...window.railyardDesigner.canvas.sel.nodes].sort()"


def new_workflow(page: Any, server: RailyardServer, name: str) -> str:
    """Create a workflow from the list page; returns its id, with the designer open."""
    page.goto(f"{server.base_url}/workflows")
    page.fill("#new-workflow-name", name)
    page.click("#create-workflow")
    page.wait_for_url(re.compile(r".*/workflows/[0-9a-f-]+/designer$"))
    page.locator(".palette-item").first.wait_for()
    match = re.search(r"/workflows/([0-9a-f-]+)/designer", page.url)
    assert match
    return match.group(1)


def publish(page: Any, note: str = "") -> None:
    """Click Publish and confirm its dialog, with ``note`` as the version's note."""
    page.click("#publish-btn")
    page.locator("#publish-note").wait_for()
    if note:
        page.fill("#publish-note", note)
    page.click("#publish-confirm")


def open_designer(page: Any, server: RailyardServer, workflow_id: str) -> None:
    page.goto(f"{server.base_url}/workflows/{workflow_id}/designer")
    page.locator(".palette-item").first.wait_for()


def diagram(page: Any) -> dict[str, Any]:
    return dict(page.evaluate(DIAGRAM))


def canonical(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True)


ICON_DRAWN = """async (el) => {
  const use = el.querySelector("use");
  if (use) { const b = use.getBBox(); return b.width > 0 && b.height > 0; }
  const image = el.querySelector("image, img");
  if (!image) return false;
  const img = new Image();
  img.src = image.getAttribute("href") || image.getAttribute("src");
  try { await img.decode(); } catch { return false; }
  return img.naturalWidth > 0;
}"""
"""JS: whether the icon in an element is drawn (static/js/icons.js, the catalog page): a
Lucide ``<use>`` whose sprite symbol resolved to a box, or a plugin ``<image>``/``<img>``
whose SVG loads."""


def icon_drawn(locator: Any, timeout: float = 10.0) -> bool:
    """Whether the icon inside ``locator`` is drawn, waiting up to ``timeout`` seconds for
    the sprite or the image to load."""
    deadline = time.monotonic() + timeout
    while True:
        if locator.evaluate(ICON_DRAWN):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def node_el(page: Any, node_id: str) -> Any:
    return page.locator(f'#canvas g.node[data-node-id="{node_id}"]')


def body_point(page: Any, node_id: str, dx: float = 110, dy: float = 5) -> tuple[float, float]:
    """A point on the node's body near its top edge (clear of label, icon and ports)."""
    deadline = time.monotonic() + 10
    while True:
        box = node_el(page, node_id).locator("rect.node-body").bounding_box()
        if box is not None:
            zoom = box["width"] / 200
            return box["x"] + dx * zoom, box["y"] + dy * zoom
        assert time.monotonic() < deadline, f"node {node_id} is not visible"
        time.sleep(0.05)


def drag(
    page: Any, start: tuple[float, float], end: tuple[float, float], *, shift: bool = False
) -> None:
    """Press, move in steps, release: a person's drag."""
    if shift:
        page.keyboard.down("Shift")
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, steps=6)
    page.mouse.move(*end, steps=6)
    page.mouse.up()
    if shift:
        page.keyboard.up("Shift")


def drag_node(page: Any, node_id: str, dx: float, dy: float) -> None:
    x, y = body_point(page, node_id)
    drag(page, (x, y), (x + dx, y + dy))


def port_center(page: Any, node_id: str, side: str, port: str) -> tuple[float, float]:
    circle = node_el(page, node_id).locator(f'circle.port-{side}[data-port="{port}"]')
    box = None
    for _ in range(50):  # the canvas redraws (and replaces its elements) on animation frames
        circle.wait_for(state="visible")
        box = circle.bounding_box()
        if box:
            break
        page.wait_for_timeout(100)
    assert box, f"no {side} port {port} on {node_id}"
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def connect(page: Any, source: str, port: str, target: str, target_port: str = "in") -> None:
    drag(page, port_center(page, source, "out", port), port_center(page, target, "in", target_port))


def edge_point(page: Any, edge_id: str) -> tuple[float, float]:
    """Screen point in the middle of an edge's path."""
    point = page.evaluate(
        """id => {
          const p = document.querySelector(`#canvas path.edge[data-edge-id="${id}"]`);
          const at = p.getPointAtLength(p.getTotalLength() / 2);
          const m = p.getScreenCTM();
          return [at.x * m.a + at.y * m.c + m.e, at.x * m.b + at.y * m.d + m.f];
        }""",
        edge_id,
    )
    return float(point[0]), float(point[1])


def focus_canvas(page: Any) -> None:
    """Move the keyboard focus to the canvas (out of the side panel's fields)."""
    page.locator("#canvas").focus()


def press(page: Any, keys: str) -> None:
    focus_canvas(page)
    page.keyboard.press(keys)


def wait_layout_done(page: Any) -> None:
    page.wait_for_function("() => window.railyardDesigner.editor.animation === null")


def wait_saved(page: Any) -> None:
    page.wait_for_function(
        "() => !window.railyardDesigner.saver.dirty && !window.railyardDesigner.saver.inFlight"
    )


OVERLAPS = """() => {
  const { model } = window.railyardDesigner;
  const box = (n) => [n.position.x, n.position.y,
                      n.position.x + 200, n.position.y + model.nodeHeight(n)];
  const found = [];
  model.nodes.forEach((a, i) => model.nodes.slice(i + 1).forEach((b) => {
    const [p, q] = [box(a), box(b)];
    if (p[0] < q[2] && q[0] < p[2] && p[1] < q[3] && q[1] < p[3]) found.push([a.id, b.id]);
  }));
  return found;
}"""
"""JS: the pairs of node ids whose rectangles (position, 200 wide, the drawn height) overlap."""


def overlapping_nodes(page: Any) -> list[tuple[str, str]]:
    """Pairs of nodes of the designer's diagram whose rectangles overlap (none is right)."""
    return [(a, b) for a, b in page.evaluate(OVERLAPS)]


SET_FIELD = """([id, name]) => {
  const m = window.railyardDesigner.model.node(id).config.mapping || [];
  if (!Array.isArray(m)) return m[name];
  const entry = m.find((e) => e.name === name);
  return entry ? entry.value : undefined;
}"""
"""JS ``([node id, field name]) -> value``: one field of a Set's Fields (the ordered list
``[{name, value}]``, or the older object form)."""


def wait_set_field(page: Any, node_id: str, name: str, value: Any) -> None:
    """Wait until the Set ``node_id``'s field ``name`` holds ``value``."""
    page.wait_for_function(
        f"([id, name, want]) => ({SET_FIELD})([id, name]) === want", arg=[node_id, name, value]
    )


def open_node(page: Any, node_id: str) -> Any:
    """Click the body of node ``node_id``; returns its loaded config form."""
    page.locator(f'#canvas g.node[data-node-id="{node_id}"] rect.node-body').click(
        position={"x": 110, "y": 5}
    )
    form = page.locator(f'#config-panel form.config-form[data-node-id="{node_id}"]')
    form.wait_for()
    return form


def save_draft(page: Any, server: RailyardServer, workflow_id: str, d: dict[str, Any]) -> str:
    """Save ``d`` as the workflow's draft through the API as the page's user, then open the
    designer on it; returns the page's CSRF token (for further API calls as that user)."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    saved = page.request.put(
        f"{server.base_url}/api/workflows/{workflow_id}/draft",
        data=json.dumps({"diagram": d}),
        headers={"content-type": "application/json", "x-csrftoken": token},
    )
    assert saved.status == 200, saved.text()
    open_designer(page, server, workflow_id)
    return str(token)


def open_settings(page: Any, server: RailyardServer, workflow_id: str, node_id: str) -> Any:
    """Open the workflow's designer and the settings of ``node_id``; the loaded form."""
    open_designer(page, server, workflow_id)
    page.mouse.click(*body_point(page, node_id))
    form = page.locator(f'#config-panel .config-form[data-node-id="{node_id}"]')
    form.wait_for()
    return form


def wait_for_run(page: Any, run_id: str, timeout: float = 30) -> dict[str, Any]:
    """The run ``run_id`` once it has ended (read through the page's session)."""
    deadline = time.monotonic() + timeout
    while True:
        run = page.evaluate(f"() => fetch('/api/runs/{run_id}').then(r => r.json())")
        if run.get("status") in ("succeeded", "failed", "cancelled", "timed_out"):
            return dict(run)
        assert time.monotonic() < deadline, f"run {run_id} did not finish: {run}"
        time.sleep(0.2)


def drag_field(page: Any, field: Any, target: Any) -> None:
    """Drag ``field`` (an entry of the settings' Input fields strip, which stays in view)
    onto ``target`` with the mouse (HTML5 drag and drop). The target is measured once the
    drag has begun and the page has drawn since: pressing on the field takes the focus
    from the target, and a focused editor's assist bar that hides on blur moves what is
    below it. The button is released once the target has stayed where it is for two frames."""
    target.scroll_into_view_if_needed()
    # within the strip's own scrolling list (the strip itself stays in view)
    field.evaluate("el => el.scrollIntoView({block: 'nearest'})")
    source = field.bounding_box()
    assert source, "the field must be drawn"
    page.mouse.move(source["x"] + 8, source["y"] + source["height"] / 2)
    page.mouse.down()
    page.mouse.move(source["x"] + 16, source["y"] + source["height"] / 2 + 6, steps=3)
    frames = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    page.evaluate(frames)
    goal = target.bounding_box()
    assert goal, "the target must be drawn"
    page.mouse.move(goal["x"] + 8, goal["y"] + goal["height"] / 2, steps=6)
    # on a busy machine the target can still move (an assist bar hiding on blur) after it
    # was measured: follow it until it stays put for two frames, then release
    for _ in range(10):
        page.evaluate(frames)
        now = target.bounding_box()
        assert now, "the target must be drawn"
        if abs(now["x"] - goal["x"]) < 1 and abs(now["y"] - goal["y"]) < 1:
            break
        goal = now
        page.mouse.move(goal["x"] + 8, goal["y"] + goal["height"] / 2, steps=2)
    page.mouse.up()
