// Edit commands of the designer, shared by the keyboard, the toolbar and the canvas:
// delete, copy, cut, paste, duplicate, select all, nudge, connect, auto-layout, sticky
// notes and inserting a node on an edge. Each command is one model change (model.batch),
// so one undo step (history.js).

import { readFragment, writeFragment } from "./diagram-clipboard.js";
import { layeredLayout } from "./layout.js";
import { isNote, NODE_WIDTH, NOTE_TYPE } from "./model.js";

const PASTE_OFFSET = 48; // canvas units right and down of the copied nodes
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
    this.pasteCount = 0;
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
    this.pasteCount = 0;
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
    this.pasteCount++;
    const offset = PASTE_OFFSET * this.pasteCount;
    const ids = this.model.insertFragment(fragment, offset, offset);
    this.canvas.changeSelection((sel) => sel.setNodes(ids));
    this.onStatus(`Pasted ${plural(ids.length, "node")}`, "ok");
    return ids;
  }

  /** Copy and paste in one step, without touching the clipboard. */
  duplicate() {
    const ids = [...this.sel.nodes];
    if (!ids.length) return [];
    const added = this.model.insertFragment(this.model.fragment(ids), PASTE_OFFSET, PASTE_OFFSET);
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

  /** Add a sticky note at canvas point (x, y), selected. */
  addNote(x, y) {
    const node = this.model.addNode(NOTE_TYPE, this.canvas.snapped(x), this.canvas.snapped(y), { text: "" });
    this.canvas.select({ kind: "node", id: node.id });
    return node;
  }

  /**
   * Add a node of ``type`` connected after ``sourceId``'s output ``port`` at a canvas point
   * (quick-add from a port); one step.
   */
  addAfter(sourceId, port, type, at) {
    let node = null;
    this.model.batch(() => {
      node = this.model.addNode(type, this.canvas.snapped(at.x), this.canvas.snapped(at.y - 28));
      const input = this.model.inputsOf(node)[0];
      if (input) this.model.connect(sourceId, port, node.id, input);
    });
    this.canvas.select({ kind: "node", id: node.id });
    return node;
  }

  /**
   * Put a new node of ``type`` into an edge: source -> new -> target (one step). Falls back
   * to a plain add when the type has no input or no output.
   */
  insertOnEdge(edgeId, type, at) {
    const edge = this.model.edge(edgeId);
    let node = null;
    this.model.batch(() => {
      node = this.model.addNode(type, this.canvas.snapped(at.x - NODE_WIDTH / 2), this.canvas.snapped(at.y - 28));
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

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
