// Mouse gestures of the canvas (canvas.js):
//   - drag a node: moves it, or every selected node when it is selected (snapped to the
//     grid when snapping is on); one model change at the end, so one undo step;
//   - click a node or edge: selects it; Shift/Ctrl/Cmd-click toggles it in the selection;
//   - drag from an output port: connects; dropped on empty canvas it asks for a node to
//     add there (onQuickAdd); a click on an output port asks too;
//   - drag on the background: pans; with Shift, or in box mode, draws a selection box;
//   - wheel: zooms at the cursor.
// A locked canvas (the designer of a user who may not edit) only selects, pans and zooms.
// mousedown/mousemove/mouseup (not pointer capture) so that synthetic mouse input
// (Playwright) drives it like a person would.

import { NODE_WIDTH } from "./model.js";
import { nodesInRect } from "./selection.js";

const DRAG_THRESHOLD = 3; // px before a mousedown counts as a drag rather than a click

/** Wire the mouse handlers of ``canvas`` (a Canvas). */
export function attachInput(canvas) {
  const svg = canvas.svg;
  svg.addEventListener("mousedown", (e) => onMouseDown(canvas, e));
  // where Ctrl+V pastes: the pointer while it is over the canvas
  svg.addEventListener("mousemove", (e) => (canvas.pointer = { clientX: e.clientX, clientY: e.clientY }));
  svg.addEventListener("mouseleave", () => (canvas.pointer = null));
  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    canvas.zoomAt(e.deltaY < 0 ? 1.1 : 1 / 1.1, e.clientX, e.clientY);
  }, { passive: false });
  window.addEventListener("mousemove", (e) => onMouseMove(canvas, e));
  window.addEventListener("mouseup", (e) => onMouseUp(canvas, e));
}

function additive(e) {
  return e.shiftKey || e.ctrlKey || e.metaKey;
}

function onMouseDown(canvas, e) {
  if (e.button !== 0) return;
  const model = canvas.model;
  const target = e.target;
  const nodeEl = target.closest(".node");
  const start = { clientX: e.clientX, clientY: e.clientY, moved: false };

  const editable = !canvas.readOnly && !canvas.locked;
  if (editable && target.classList.contains("port-out") && nodeEl) {
    e.preventDefault();
    canvas.gesture = { ...start, type: "connect", source: nodeEl.dataset.nodeId, port: target.dataset.port };
    canvas.svg.classList.add("connecting");
    return;
  }
  if (nodeEl) {
    e.preventDefault();
    const id = nodeEl.dataset.nodeId;
    if (canvas.readOnly) {
      canvas.gesture = { ...start, type: "click", id };
      return;
    }
    if (canvas.locked) {
      canvas.select({ kind: "node", id });
      canvas.gesture = { ...start, type: "click", id };
      return;
    }
    if (additive(e)) {
      canvas.changeSelection((sel) => sel.toggle("node", id));
      canvas.gesture = { ...start, type: "toggle", id };
      return;
    }
    if (!canvas.sel.has("node", id)) canvas.select({ kind: "node", id });
    const ids = [...canvas.sel.nodes];
    const origins = new Map(ids.map((n) => [n, { ...model.node(n).position }]));
    canvas.gesture = { ...start, type: "move", id, ids, origins };
    return;
  }
  const edgeId = target.dataset?.edgeId;
  if (edgeId && editable) {
    e.preventDefault();
    if (additive(e)) canvas.changeSelection((sel) => sel.toggle("edge", edgeId));
    else canvas.select({ kind: "edge", id: edgeId });
    return;
  }
  e.preventDefault();
  canvas.svg.focus({ preventScroll: true });
  if (editable && (e.shiftKey || canvas.boxMode)) {
    const p = canvas.screenToCanvas(e.clientX, e.clientY);
    canvas.gesture = { ...start, type: "box", from: p, add: e.ctrlKey || e.metaKey };
    return;
  }
  canvas.gesture = { ...start, type: "pan", origin: { x: model.viewport.x, y: model.viewport.y } };
  canvas.svg.classList.add("panning");
}

function onMouseMove(canvas, e) {
  const g = canvas.gesture;
  if (!g) return;
  const dx = e.clientX - g.clientX;
  const dy = e.clientY - g.clientY;
  if (!g.moved && Math.hypot(dx, dy) < DRAG_THRESHOLD) return;
  g.moved = true;
  const model = canvas.model;
  const zoom = model.viewport.zoom;
  if (g.type === "pan") {
    model.setViewport({ x: g.origin.x + dx, y: g.origin.y + dy });
  } else if (g.type === "move") {
    // Snap the dragged node; the others keep their offsets to it.
    const lead = g.origins.get(g.id);
    const sx = canvas.snapped(lead.x + dx / zoom) - lead.x;
    const sy = canvas.snapped(lead.y + dy / zoom) - lead.y;
    for (const id of g.ids) {
      const o = g.origins.get(id);
      model.moveNode(id, o.x + sx, o.y + sy, { silent: true });
    }
    canvas.moveInPlace(g.ids);
  } else if (g.type === "connect") {
    const p = canvas.screenToCanvas(e.clientX, e.clientY);
    canvas.showDraft(canvas.draftPath(g.source, g.port, p));
    const hover = document.elementFromPoint(e.clientX, e.clientY);
    canvas.highlightDropTarget(hover && hover.closest ? hover.closest(".node") : null, g.source);
  } else if (g.type === "box") {
    const p = canvas.screenToCanvas(e.clientX, e.clientY);
    canvas.showBox({ x1: g.from.x, y1: g.from.y, x2: p.x, y2: p.y });
  }
}

function onMouseUp(canvas, e) {
  const g = canvas.gesture;
  if (!g) return;
  canvas.gesture = null;
  canvas.svg.classList.remove("connecting", "panning");
  canvas.showDraft("");
  canvas.showBox(null);
  canvas.highlightDropTarget(null);
  const model = canvas.model;

  if (g.type === "connect") {
    const hit = document.elementFromPoint(e.clientX, e.clientY);
    const nodeEl = hit && hit.closest ? hit.closest(".node") : null;
    const inCanvas = hit && canvas.svg.contains(hit);
    if (!nodeEl) {
      // A click on a port, or a drop on empty canvas: pick a node to add there.
      // dropped: near the drop point; clicked: next to the port
      if (inCanvas || !g.moved) canvas.onQuickAdd(g.source, g.port, e.clientX, e.clientY, g.moved);
      return;
    }
    if (nodeEl.dataset.nodeId === g.source) {
      if (!g.moved) canvas.onQuickAdd(g.source, g.port, e.clientX, e.clientY);
      return;
    }
    const target = model.node(nodeEl.dataset.nodeId);
    // Dropping on an input port uses that port; on the body, the node's first input.
    const port = hit.classList.contains("port-in") ? hit.dataset.port : model.inputsOf(target)[0];
    if (!port) return;
    const edge = model.connect(g.source, g.port, target.id, port);
    if (edge) canvas.select({ kind: "edge", id: edge.id });
  } else if (g.type === "move") {
    if (g.moved) {
      model.emit(); // one change per drag, not per pixel
    } else {
      // A plain click on a node of a multi-selection selects just that node.
      if (canvas.sel.size > 1) canvas.select({ kind: "node", id: g.id });
      canvas.onNodeClick(g.id);
    }
  } else if (g.type === "click") {
    canvas.onNodeClick(g.id);
  } else if (g.type === "box") {
    if (!g.moved) {
      if (!g.add) canvas.select(null);
      return;
    }
    const p = canvas.screenToCanvas(e.clientX, e.clientY);
    const ids = nodesInRect(model, { x1: g.from.x, y1: g.from.y, x2: p.x, y2: p.y }, NODE_WIDTH);
    canvas.changeSelection((sel) => sel.setNodes(ids, g.add));
  } else if (g.type === "pan" && !g.moved && !canvas.readOnly) {
    canvas.select(null);
  }
}
