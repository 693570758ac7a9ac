// Edit commands of the designer, shared by the keyboard, the toolbar and the canvas:
// delete, copy, cut, paste, duplicate, select all, nudge, connect, auto-layout, sticky
// notes and inserting a node on an edge. Each command is one model change (model.batch),
// so one undo step (history.js).

import { readFragment, writeFragment } from "./diagram-clipboard.js";
import { layeredLayout } from "./layout.js";
import { isNote, NODE_WIDTH, NOTE_HEIGHT, NOTE_TYPE } from "./model.js";
import { freeOffset, freeSpot, roomOnEdge, spotAfter } from "./placement.js";

const PASTE_OFFSET = 48; // canvas units right and down of the copied nodes (duplicate)
const LAYOUT_MS = 300; // auto-layout animation
const NUDGE = 24; // arrow keys move the selection by one grid step (Shift: 1 unit)

export class Editor {
  /**
   * @param {import("./model.js").DiagramModel} model
   * @param {import("./canvas.js").Canvas} canvas
   * @param {{onStatus: (text: string, kind?: string) => void}} options
   */
  constructor(model, canvas, { onStatus = () => {} } = {}) {
    this.model = model;
    this.canvas = canvas;
    this.onStatus = onStatus;
    this.animation = null;
  }

  get sel() {
    return this.canvas.sel;
  }

  /** Remove the selected nodes (with their edges) and edges. */
  deleteSelection() {
    if (!this.sel.size) return false;
    const nodes = [...this.sel.nodes];
    const edges = [...this.sel.edges];
    this.canvas.select(null);
    this.model.removeMany(nodes, edges);
    return true;
  }

  /** Copy the selected nodes and the edges between them; resolves to the node count. */
  async copy() {
    const ids = [...this.sel.nodes];
    if (!ids.length) return 0;
    const where = await writeFragment(this.model.fragment(ids));
    this.onStatus(`Copied ${plural(ids.length, "node")}${where === "page" ? " (in-page clipboard)" : ""}`, "ok");
    return ids.length;
  }

  async cut() {
    if (!(await this.copy())) return;
    this.model.removeMany([...this.sel.nodes]);
    this.canvas.select(null);
  }

  /** Paste the clipboard's fragment with fresh ids, offset, and select it. */
  async paste() {
    const fragment = await readFragment();
    if (!fragment || !fragment.nodes.length) {
      this.onStatus("Nothing to paste: copy nodes first", "error");
      return [];
    }
    // At the pointer when it is over the canvas, else in the middle of the view; moved
    // down (then right) until no pasted node covers another.
    const pointer = this.canvas.pointerPoint();
    const nodes = fragment.nodes.filter((n) => n && typeof n.type === "string");
    let at = pointer;
    if (!at) {
      const c = this.canvas.visibleCenter();
      const box = fragmentBox(nodes, (n) => this.heightOf(n));
      at = { x: c.x - box.w / 2, y: c.y - box.h / 2 };
    }
    const snap = { x: this.canvas.snapped(at.x), y: this.canvas.snapped(at.y) };
    const { dx, dy } = freeOffset(this.model, nodes, snap, (n) => this.heightOf(n));
    const ids = this.model.insertFragment({ nodes, edges: fragment.edges }, dx, dy);
    this.canvas.changeSelection((sel) => sel.setNodes(ids));
    this.onStatus(`Pasted ${plural(ids.length, "node")}`, "ok");
    return ids;
  }

  /** Copy and paste in one step, without touching the clipboard. */
  duplicate() {
    const ids = [...this.sel.nodes];
    if (!ids.length) return [];
    const fragment = this.model.fragment(ids);
    const box = fragmentBox(fragment.nodes, (n) => this.heightOf(n));
    const want = { x: box.x + PASTE_OFFSET, y: box.y + PASTE_OFFSET };
    const { dx, dy } = freeOffset(this.model, fragment.nodes, want, (n) => this.heightOf(n));
    const added = this.model.insertFragment(fragment, dx, dy);
    this.canvas.changeSelection((sel) => sel.setNodes(added));
    return added;
  }

  selectAll() {
    this.canvas.changeSelection((sel) => sel.setNodes(this.model.nodes.map((n) => n.id)));
  }

  /** Move the selected nodes by (dx, dy) grid steps (fine: canvas units). */
  nudge(dx, dy, fine = false) {
    const step = fine ? 1 : NUDGE;
    const moves = [...this.sel.nodes].map((id) => {
      const p = this.model.node(id).position;
      return { id, x: p.x + dx * step, y: p.y + dy * step };
    });
    if (moves.length) this.model.moveNodes(moves);
  }

  /** Connect the first selected node's first output to the second's first input. */
  connectSelected() {
    const [a, b] = [...this.sel.nodes].map((id) => this.model.node(id));
    if (!a || !b) {
      this.onStatus("Select two nodes to connect them (the first one is the source)", "error");
      return null;
    }
    const out = this.model.outputsOf(a)[0];
    const inp = this.model.inputsOf(b)[0];
    const edge = out && inp ? this.model.connect(a.id, out, b.id, inp) : null;
    if (!edge) this.onStatus(`Cannot connect ${a.id} to ${b.id}`, "error");
    return edge;
  }

  /** The height a node (or fragment node) of the clipboard has on the canvas. */
  heightOf(node) {
    return this.model.nodeHeight({ id: "", type: node.type, config: node.config || {} });
  }

  /** Add a sticky note at canvas point (x, y), or the nearest free place; selected. */
  addNote(x, y) {
    const at = freeSpot(this.model, { x: this.canvas.snapped(x), y: this.canvas.snapped(y) }, { h: NOTE_HEIGHT });
    const node = this.model.addNode(NOTE_TYPE, at.x, at.y, { text: "" });
    this.canvas.select({ kind: "node", id: node.id });
    this.canvas.reveal(node.id);
    return node;
  }

  /**
   * Add a node of ``type`` connected after ``sourceId``'s output ``port`` (quick-add); one
   * step. ``at``: the canvas point a connection was dropped on (the node goes there, or
   * the nearest free place); without it, one column right of the port, clear of others.
   */
  addAfter(sourceId, port, type, at = null) {
    let node = null;
    const source = this.model.node(sourceId);
    const h = this.heightOf({ type });
    const spot = at
      ? freeSpot(this.model, { x: this.canvas.snapped(at.x), y: this.canvas.snapped(at.y - h / 2) }, { h })
      : spotAfter(this.model, source, port, type);
    this.model.batch(() => {
      node = this.model.addNode(type, spot.x, spot.y);
      const input = this.model.inputsOf(node)[0];
      if (input) this.model.connect(sourceId, port, node.id, input);
    });
    this.canvas.select({ kind: "node", id: node.id });
    this.canvas.reveal(node.id); // its ports within reach, even beside a node at the edge
    return node;
  }

  /**
   * Put a new node of ``type`` into an edge: source -> new -> target (one step), one column
   * right of the source; the target and what follows it move right to make room. Falls
   * back to a plain add near ``at`` when the type has no input or no output.
   */
  insertOnEdge(edgeId, type, at) {
    const edge = this.model.edge(edgeId);
    let node = null;
    const probe = { id: "", type, config: {} };
    const joins = edge && this.model.inputsOf(probe).length && this.model.outputsOf(probe).length;
    this.model.batch(() => {
      let spot;
      if (joins) {
        const room = roomOnEdge(this.model, edge, type);
        if (room.moves.length) this.model.moveNodes(room.moves);
        spot = freeSpot(this.model, room.at, { h: this.heightOf(probe) });
      } else {
        const want = { x: this.canvas.snapped(at.x - NODE_WIDTH / 2), y: this.canvas.snapped(at.y - 28) };
        spot = freeSpot(this.model, want, { h: this.heightOf(probe) });
      }
      node = this.model.addNode(type, spot.x, spot.y);
      const input = this.model.inputsOf(node)[0];
      const output = this.model.outputsOf(node)[0];
      if (edge && input && output) {
        this.model.removeEdge(edge.id);
        this.model.connect(edge.source, edge.source_port, node.id, input);
        this.model.connect(node.id, output, edge.target, edge.target_port);
      }
    });
    this.canvas.select({ kind: "node", id: node.id });
    return node;
  }

  /**
   * Lay the diagram out left to right (layout.js), keeping its top-left corner, animated
   * over LAYOUT_MS (as plain boxes, edges hidden, while they move); one undo step. Sticky notes stay where they are. Resolves when done.
   */
  autoLayout() {
    const nodes = this.model.nodes.filter((n) => !isNote(n));
    if (!nodes.length) return Promise.resolve();
    const place = layeredLayout(nodes, this.model.edges, (id) => this.model.nodeHeight(this.model.node(id)), NODE_WIDTH);
    const left = Math.min(...nodes.map((n) => n.position.x));
    const top = Math.min(...nodes.map((n) => n.position.y));
    const from = new Map(nodes.map((n) => [n.id, { ...n.position }]));
    const to = new Map(nodes.map((n) => {
      const p = place.get(n.id);
      return [n.id, { x: this.canvas.snapped(left + p.x), y: this.canvas.snapped(top + p.y) }];
    }));
    if (this.animation) cancelAnimationFrame(this.animation.frame);
    const ids = nodes.map((n) => n.id);
    const heights = new Map(nodes.map((n) => [n.id, this.model.nodeHeight(n)]));
    return new Promise((resolve) => {
      const start = performance.now();
      const frame = (now) => {
        const t = Math.min(1, (now - start) / LAYOUT_MS);
        const k = t * (2 - t); // ease out
        if (t < 1) {
          // Boxes glide to their places (canvas.drawProxy); the real nodes move once at the end.
          this.canvas.drawProxy(ids.map((id) => {
            const a = from.get(id);
            const b = to.get(id);
            return { x: a.x + (b.x - a.x) * k, y: a.y + (b.y - a.y) * k, h: heights.get(id) };
          }));
          this.animation.frame = requestAnimationFrame(frame);
          return;
        }
        this.animation = null;
        this.canvas.drawProxy(null);
        this.model.moveNodes(ids.map((id) => ({ id, ...to.get(id) })));
        this.canvas.fit(40);
        resolve();
      };
      this.animation = { frame: requestAnimationFrame(frame) };
    });
  }
}

/** The bounding box {x, y, w, h} of fragment nodes. */
function fragmentBox(nodes, heightOf) {
  if (!nodes.length) return { x: 0, y: 0, w: 0, h: 0 };
  const xs = nodes.map((n) => Number(n.position?.x) || 0);
  const ys = nodes.map((n) => Number(n.position?.y) || 0);
  const x = Math.min(...xs);
  const y = Math.min(...ys);
  const w = Math.max(...xs) + NODE_WIDTH - x;
  const h = Math.max(...nodes.map((n, i) => ys[i] + heightOf(n))) - y;
  return { x, y, w, h };
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
