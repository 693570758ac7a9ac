// The canvas selection: a set of node ids and a set of edge ids.
//
// A plain click selects one item; Shift/Ctrl/Cmd-click toggles an item in or out; a box
// selects every node inside a rectangle (adding to the selection with Shift). Edges between
// selected nodes travel with them on copy; Delete removes nodes and selected edges alike.

export class Selection {
  constructor() {
    this.nodes = new Set();
    this.edges = new Set();
  }

  get size() {
    return this.nodes.size + this.edges.size;
  }

  has(kind, id) {
    return (kind === "node" ? this.nodes : this.edges).has(id);
  }

  clear() {
    this.nodes.clear();
    this.edges.clear();
  }

  /** Only this item. */
  only(kind, id) {
    this.clear();
    if (id) (kind === "node" ? this.nodes : this.edges).add(id);
  }

  toggle(kind, id) {
    const set = kind === "node" ? this.nodes : this.edges;
    if (set.has(id)) set.delete(id);
    else set.add(id);
  }

  /** Set the nodes (added to the current ones when ``add``). */
  setNodes(ids, add = false) {
    if (!add) this.clear();
    for (const id of ids) this.nodes.add(id);
  }

  /** The single selected item as {kind, id}, or null when none or several are selected. */
  single() {
    if (this.size !== 1) return null;
    if (this.nodes.size) return { kind: "node", id: [...this.nodes][0] };
    return { kind: "edge", id: [...this.edges][0] };
  }

  /** Drop ids that no longer exist in the model (after undo, delete ...). */
  prune(model) {
    for (const id of this.nodes) if (!model.node(id)) this.nodes.delete(id);
    for (const id of this.edges) if (!model.edge(id)) this.edges.delete(id);
  }

  key() {
    return JSON.stringify([[...this.nodes].sort(), [...this.edges].sort()]);
  }
}

/** Ids of the nodes whose boxes intersect the rectangle {x1, y1, x2, y2} (canvas units). */
export function nodesInRect(model, rect, width) {
  const x1 = Math.min(rect.x1, rect.x2);
  const x2 = Math.max(rect.x1, rect.x2);
  const y1 = Math.min(rect.y1, rect.y2);
  const y2 = Math.max(rect.y1, rect.y2);
  return model.nodes
    .filter((n) => {
      const h = model.nodeHeight(n);
      return n.position.x < x2 && n.position.x + width > x1 && n.position.y < y2 && n.position.y + h > y1;
    })
    .map((n) => n.id);
}
