"""Editing in the designer with the mouse and the keyboard, as people do it.

- 20 mixed edits (add, move, connect, rename, note, duplicate, delete, nudge, group move,
  auto-layout, edge delete, paste, cut) are each undone, one step at a time, back to the
  empty canvas, each intermediate diagram exactly as it was; redo brings the last back.
- Nodes copied in one workflow are pasted into another (fresh ids, in view, edges between
  them kept), through the system clipboard and through the in-page fallback when the
  Clipboard API is denied.
- Box select (Shift-drag), group move, Delete, and undo of all three.
- Auto-layout lays a tangled diagram out left to right without overlaps; undo restores it.
- Quick-add from an output port, insert on an edge, sticky note, help overlay.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import (
    SELECTED,
    body_point,
    canonical,
    connect,
    diagram,
    drag,
    drag_node,
    edge_point,
    focus_canvas,
    icon_drawn,
    new_workflow,
    node_el,
    open_designer,
    overlapping_nodes,
    port_center,
    press,
    wait_layout_done,
    wait_saved,
)

pytestmark = pytest.mark.e2e

BUILD_ORDERS = """() => {
  const { model, canvas } = window.railyardDesigner;
  const ids = model.batch(() => {
    const hook = model.addNode("trigger.webhook", 0, 0);
    const set = model.addNode("control.set", 312, 0);
    const check = model.addNode("control.if", 624, 0);
    const wait = model.addNode("control.delay", 936, 120);
    const mapping = { total: "=body.total" };
    model.updateNode(set.id, { label: "Prepare order", config: { mapping } });
    model.connect(hook.id, "out", set.id, "in");
    model.connect(set.id, "out", check.id, "in");
    model.connect(check.id, "true", wait.id, "in");
    return { hook: hook.id, set: set.id, check: check.id, wait: wait.id };
  });
  canvas.fit();
  return ids;
}"""


def add_from_palette(page: Any, node_type: str) -> str:
    before = set(n["id"] for n in diagram(page)["nodes"])
    page.locator(f'.palette-item[data-type="{node_type}"]').click()
    after = [n["id"] for n in diagram(page)["nodes"] if n["id"] not in before]
    assert len(after) == 1
    return after[0]


def test_undo_redo_across_20_mixed_edits_restores_each_diagram(
    page: Any, railyard_server: RailyardServer
) -> None:
    login(page, railyard_server)
    new_workflow(page, railyard_server, "Undo everything")
    states = [canonical(diagram(page))]

    def edited(what: str) -> None:
        state = canonical(diagram(page))
        assert state != states[-1], f"edit {len(states)} ({what}) changed nothing"
        states.append(state)

    hook = add_from_palette(page, "trigger.webhook")
    edited("add webhook")
    drag_node(page, hook, -250, -150)
    edited("move webhook")
    setn = add_from_palette(page, "control.set")
    edited("add set")
    drag_node(page, setn, -20, -150)
    edited("move set")
    check = add_from_palette(page, "control.if")
    edited("add if")
    drag_node(page, check, 200, -100)
    edited("move if")
    connect(page, hook, "out", setn)
    edited("connect webhook -> set")
    connect(page, setn, "out", check)
    edited("connect set -> if")
    node_el(page, setn).locator("rect.node-body").click(position={"x": 110, "y": 5})
    label = page.locator(
        f'#config-panel form.config-form[data-node-id="{setn}"] [data-field="__label"]'
    )
    label.fill("Prepare the order")
    edited("rename set in the panel")
    press(page, "n")
    edited("add a sticky note")
    page.locator("#note-text").fill("Ask finance before changing the threshold")
    edited("write the note")
    node_el(page, setn).locator("rect.node-body").click(position={"x": 110, "y": 5})
    press(page, "Control+d")
    edited("duplicate set")
    press(page, "Delete")
    edited("delete the duplicate")
    node_el(page, check).locator("rect.node-body").click(position={"x": 110, "y": 5})
    press(page, "ArrowDown")
    edited("nudge if down")
    press(page, "Control+a")
    drag_node(page, hook, 60, 40)
    edited("move everything")
    press(page, "l")
    wait_layout_done(page)
    edited("auto-layout")
    page.mouse.click(*edge_point(page, diagram(page)["edges"][1]["id"]))
    press(page, "Backspace")
    edited("delete an edge")
    node_el(page, setn).locator("rect.node-body").click(position={"x": 110, "y": 5})
    press(page, "Control+c")
    page.wait_for_function("() => /Copied/.test(document.getElementById('status').textContent)")
    press(page, "Control+v")
    page.wait_for_function("n => window.railyardDesigner.model.nodes.length > n", arg=4)
    edited("paste")
    press(page, "Shift+ArrowRight")
    edited("fine nudge of the pasted node")
    press(page, "Control+x")
    page.wait_for_function("() => window.railyardDesigner.model.nodes.length === 4")
    edited("cut")
    assert len(states) == 21
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-editing-20-edits.png"))

    undo_button = page.locator("#undo-btn")
    for i in range(20, 0, -1):
        if i % 2:
            undo_button.click()
        else:
            press(page, "Control+z")
        assert canonical(diagram(page)) == states[i - 1], f"undo back to state {i - 1}"
    assert undo_button.is_disabled()
    assert diagram(page) == {"nodes": [], "edges": []}
    for i in range(1, 21):
        press(page, "Control+Shift+z" if i % 2 else "Control+y")
        assert canonical(diagram(page)) == states[i], f"redo to state {i}"
    assert page.locator("#redo-btn").is_disabled()


def test_copy_paste_between_two_workflows(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
    login(page, server)
    new_workflow(page, server, "Copy source")
    ids = page.evaluate(BUILD_ORDERS)
    # Shift-click adds to the selection: the Set and the If, with the edge between them.
    node_el(page, ids["set"]).locator("rect.node-body").click(position={"x": 110, "y": 5})
    node_el(page, ids["check"]).locator("rect.node-body").click(
        position={"x": 110, "y": 5}, modifiers=["Shift"]
    )
    assert page.evaluate(SELECTED) == sorted([ids["set"], ids["check"]])
    source = diagram(page)
    press(page, "Control+c")
    page.wait_for_function(
        "() => /Copied 2 nodes/.test(document.getElementById('status').textContent)"
    )
    clip = page.evaluate("() => navigator.clipboard.readText()")
    assert '"railyard/diagram-fragment@1"' in clip

    target_id = new_workflow(page, server, "Paste target")
    page.evaluate("() => window.railyardDesigner.model.addNode('control.set', 0, 0)")
    press(page, "Control+v")
    page.wait_for_function("() => window.railyardDesigner.model.nodes.length === 3")
    pasted = diagram(page)
    by_type = {n["type"]: n for n in pasted["nodes"][1:]}
    assert set(by_type) == {"control.set", "control.if"}
    assert by_type["control.set"]["id"] == "set_2", "fresh id next to the existing set_1"
    assert by_type["control.set"]["label"] == "Prepare order"
    assert by_type["control.set"]["config"] == {"mapping": {"total": "=body.total"}}
    original = {n["type"]: n for n in source["nodes"]}
    shift = by_type["control.if"]["position"]["x"] - original["control.if"]["position"]["x"]
    # pasted in the middle of the view (the pointer was not over the canvas), in sight
    for pasted_node in by_type.values():
        assert node_el(page, pasted_node["id"]).is_visible()
    assert not overlapping_nodes(page)
    assert (
        by_type["control.set"]["position"]["x"] - original["control.set"]["position"]["x"] == shift
    )
    assert [(e["source"], e["target"]) for e in pasted["edges"]] == [
        (by_type["control.set"]["id"], by_type["control.if"]["id"])
    ]
    assert page.evaluate(SELECTED) == sorted(n["id"] for n in by_type.values())
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-pasted-from-other-workflow.png"))
    press(page, "Control+s")
    wait_saved(page)

    # Clipboard API denied: the in-page clipboard carries the nodes to another page.
    denied = page.context.browser.new_context(viewport={"width": 1440, "height": 900})
    denied.add_init_script(
        "navigator.clipboard.writeText = () => Promise.reject(new DOMException('denied'));"
        "navigator.clipboard.readText = () => Promise.reject(new DOMException('denied'));"
    )
    other = denied.new_page()
    try:
        login(other, server)
        open_designer(other, server, target_id)
        other.locator(
            f'#canvas g.node[data-node-id="{by_type["control.if"]["id"]}"] rect.node-body'
        ).click(position={"x": 110, "y": 5})
        press(other, "Control+c")
        other.wait_for_function(
            "() => /in-page clipboard/.test(document.getElementById('status').textContent)"
        )
        new_workflow(other, server, "Paste without clipboard API")
        press(other, "Control+v")
        other.wait_for_function("() => window.railyardDesigner.model.nodes.length === 1")
        assert diagram(other)["nodes"][0]["type"] == "control.if"
    finally:
        denied.close()


def test_box_select_group_move_delete_and_undo(page: Any, railyard_server: RailyardServer) -> None:
    login(page, railyard_server)
    new_workflow(page, railyard_server, "Box select")
    ids = page.evaluate(BUILD_ORDERS)
    start = diagram(page)
    # Shift-drag a box from above-left of the Set to below-right of the If.
    sx, sy = body_point(page, ids["set"], dx=-20, dy=-30)
    ex, ey = body_point(page, ids["check"], dx=220, dy=110)
    drag(page, (sx, sy), (ex, ey), shift=True)
    assert page.evaluate(SELECTED) == sorted([ids["set"], ids["check"]])
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-box-select.png"))

    drag_node(page, ids["check"], 0, 150)
    moved = diagram(page)
    pos = {n["id"]: n["position"] for n in moved["nodes"]}
    old = {n["id"]: n["position"] for n in start["nodes"]}
    dy_set = pos[ids["set"]]["y"] - old[ids["set"]]["y"]
    assert dy_set > 100 and dy_set == pos[ids["check"]]["y"] - old[ids["check"]]["y"]
    assert pos[ids["hook"]] == old[ids["hook"]] and pos[ids["wait"]] == old[ids["wait"]]
    assert pos[ids["set"]]["y"] % 24 == 0, "snapped to the grid"

    press(page, "Delete")
    after = diagram(page)
    assert sorted(n["id"] for n in after["nodes"]) == sorted([ids["hook"], ids["wait"]])
    assert after["edges"] == []

    press(page, "Control+z")
    assert canonical(diagram(page)) == canonical(moved)
    press(page, "Control+z")
    assert canonical(diagram(page)) == canonical(start)


def test_auto_layout_left_to_right(page: Any, railyard_server: RailyardServer) -> None:
    login(page, railyard_server)
    new_workflow(page, railyard_server, "Tangled")
    page.evaluate(
        """() => {
          const { model, canvas } = window.railyardDesigner;
          model.batch(() => {
            const at = [[900, 400], [100, 300], [500, 0], [300, 500], [700, 200], [0, 0]];
            const types = ["trigger.webhook", "control.set", "control.if", "control.set",
                           "control.join", "control.delay"];
            const ids = types.map((t, i) => model.addNode(t, at[i][0], at[i][1]).id);
            model.connect(ids[0], "out", ids[1], "in");
            model.connect(ids[1], "out", ids[2], "in");
            model.connect(ids[2], "true", ids[3], "in");
            model.connect(ids[2], "false", ids[4], "in");
            model.connect(ids[3], "out", ids[4], "in");
            model.connect(ids[4], "out", ids[5], "in");
            model.connect(ids[0], "out", ids[5], "in");
            model.addNode("ui.note", 1400, 900, { text: "stays put" });
          });
          canvas.fit();
        }"""
    )
    before = diagram(page)
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-before-auto-layout.png"))
    page.locator("#layout-btn").click()
    wait_layout_done(page)
    after = diagram(page)
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-auto-layout.png"))
    pos = {n["id"]: n["position"] for n in after["nodes"]}
    for e in after["edges"]:
        assert pos[e["source"]]["x"] < pos[e["target"]]["x"], f"edge {e} points left to right"
    boxes = page.evaluate(
        """() => [...document.querySelectorAll('#canvas g.node')].map(g => {
          const r = g.querySelector('rect.node-body').getBoundingClientRect();
          return [r.left, r.top, r.right, r.bottom];
        })"""
    )
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            overlap = a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
            assert not overlap, f"nodes overlap after auto-layout: {a} {b}"
    note = next(n for n in after["nodes"] if n["type"] == "ui.note")
    assert note["position"] == {"x": 1400, "y": 900}
    press(page, "Control+z")
    assert canonical(diagram(page)) == canonical(before)


def test_quick_add_insert_on_edge_note_and_help(page: Any, railyard_server: RailyardServer) -> None:
    login(page, railyard_server)
    new_workflow(page, railyard_server, "Quick add")
    ids = page.evaluate(BUILD_ORDERS)

    # Drag from the Delay's output port to empty canvas: a searchable list opens.
    sx, sy = port_center(page, ids["wait"], "out", "out")
    drag(page, (sx, sy), (sx + 30, sy - 100))
    quick = page.locator(".quick-add")
    quick.wait_for()
    page.keyboard.type("http req")
    page.keyboard.press("Enter")
    page.wait_for_function("() => window.railyardDesigner.model.nodes.length === 5")
    d = diagram(page)
    http = next(n for n in d["nodes"] if n["type"] == "http.request")
    assert any(e["source"] == ids["wait"] and e["target"] == http["id"] for e in d["edges"])

    # Drop a palette node on the Set -> If edge: it is inserted into the edge.
    edge = next(e for e in d["edges"] if e["source"] == ids["set"] and e["target"] == ids["check"])
    ex, ey = edge_point(page, edge["id"])
    box = page.locator("#canvas").bounding_box()
    assert box
    page.locator('.palette-item[data-type="control.delay"]').drag_to(
        page.locator("#canvas"), target_position={"x": ex - box["x"], "y": ey - box["y"]}
    )
    page.wait_for_function("() => window.railyardDesigner.model.nodes.length === 6")
    d = diagram(page)
    delay = next(n for n in d["nodes"] if n["type"] == "control.delay" and n["id"] != ids["wait"])
    pairs = {(e["source"], e["target"]) for e in d["edges"]}
    assert (ids["set"], delay["id"]) in pairs and (delay["id"], ids["check"]) in pairs
    assert (ids["set"], ids["check"]) not in pairs

    # Keyboard only: "C" connects the two selected nodes, "A" adds a node after one.
    press(page, "0")  # fit: every node in view
    page.mouse.click(*body_point(page, http["id"]))
    page.keyboard.down("Control")
    page.mouse.click(*body_point(page, ids["hook"]))
    page.keyboard.up("Control")
    assert page.evaluate(SELECTED) == sorted([http["id"], ids["hook"]])
    press(page, "c")
    assert (http["id"], ids["hook"]) not in {
        (e["source"], e["target"]) for e in diagram(page)["edges"]
    }
    assert "Cannot connect" in page.locator("#status").inner_text(), "a trigger has no input"
    page.mouse.click(*body_point(page, http["id"]))
    press(page, "a")
    quick.wait_for()
    page.keyboard.type("wait until")
    page.keyboard.press("Enter")
    d = diagram(page)
    wait_until = next(n for n in d["nodes"] if n["type"] == "control.wait_until")
    assert (http["id"], wait_until["id"]) in {(e["source"], e["target"]) for e in d["edges"]}

    # Icons are drawn SVG (Lucide symbols), not characters that need an emoji font.
    for node_id in (ids["check"], ids["wait"], wait_until["id"]):
        assert icon_drawn(node_el(page, node_id).locator(".node-icon"))

    # Keyboard only: help overlay, a sticky note, Escape.
    press(page, "?")
    help_dialog = page.locator("#shortcut-help")
    help_dialog.wait_for()
    assert "Undo" in help_dialog.inner_text() and "Auto-layout" in help_dialog.inner_text()
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-shortcuts-help.png"))
    page.keyboard.press("Escape")
    assert help_dialog.is_hidden()
    press(page, "n")
    page.locator("#note-text").fill("Finance owns this flow")
    note = node_el(page, diagram(page)["nodes"][-1]["id"])
    assert "Finance owns this flow" in (note.text_content() or "")
    # Tab reaches nodes; Enter selects the focused node.
    focus_canvas(page)
    page.keyboard.press("Tab")
    focused = page.evaluate("() => document.activeElement.dataset.nodeId || null")
    assert focused
    page.keyboard.press("Enter")
    assert page.evaluate(SELECTED) == [focused]
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-editing.png"))
