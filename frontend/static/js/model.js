// The diagram the designer edits, and the port rules of node types.
// The JSON produced by toJSON() is exactly designer_schema.diagram.Diagram: Node and Edge
// forbid unknown fields, so nothing else is ever added to them.

export const NODE_WIDTH = 200;
export const NOTE_TYPE = "ui.note"; // designer_schema.diagram.NOTE_TYPE: left out of the graph
export const NOTE_HEIGHT = 112;
const PORT_SPACING = 24;
const MIN_HEIGHT = 56;

/** True for a sticky note (a comment on the canvas; no ports, never compiled). */
export function isNote(node) {
  return node.type === NOTE_TYPE;
}

export class DiagramModel {
  /**
   * @param {object} diagram  a Diagram (may be partial)
   * @param {object[]} catalog  NodeTypeSpec objects; empty for read-only views, where ports
   *   are derived from the edges.
   */
  constructor(diagram, catalog = []) {
    diagram = diagram || {};
    this.specs = new Map(catalog.map((s) => [s.type, s]));
    this.nodes = (diagram.nodes || []).map((n) => ({
      id: String(n.id),
      type: String(n.type),
      label: n.label || "",
      position: { x: Number(n.position?.x) || 0, y: Number(n.position?.y) || 0 },
      config: n.config && typeof n.config === "object" ? { ...n.config } : {},
      // fields an import could not bind: the server reports each until it holds a value
      ...(Array.isArray(n.unbound) && n.unbound.length ? { unbound: n.unbound.map(String) } : {}),
      // JSON settings whose typed text does not parse: field -> the text (the server
      // reports each until it parses; the config keeps the last valid value)
      ...(unparsedOf(n.unparsed) ? { unparsed: unparsedOf(n.unparsed) } : {}),
    }));
    this.edges = (diagram.edges || []).map((e) => ({
      id: String(e.id),
      source: String(e.source),
      source_port: e.source_port || "out",
      target: String(e.target),
      target_port: e.target_port || "in",
    }));
    const vp = diagram.viewport || {};
    this.viewport = { x: Number(vp.x) || 0, y: Number(vp.y) || 0, zoom: Number(vp.zoom) || 1 };
    this.schemaVersion = diagram.schema_version || 1;
    this.listeners = [];
    this.batchDepth = 0;
    this.batchChanged = false;
  }

  /**
   * fn(kind, info) is called after every change; kind is "graph" (content) or "viewport".
   * info.tag names edits that may merge into one undo step (the same node's config typed
   * key by key: "config:<id>"); info.source is "history" for undo/redo.
   */
  onChange(fn) {
    this.listeners.push(fn);
  }

  emit(kind = "graph", info = {}) {
    if (this.batchDepth && kind === "graph") {
      this.batchChanged = true;
      return;
    }
    for (const fn of this.listeners) fn(kind, info);
  }

  /** Run fn() with every graph change in it reported as one change (one undo step). */
  batch(fn) {
    this.batchDepth++;
    try {
      return fn();
    } finally {
      this.batchDepth--;
      if (!this.batchDepth && this.batchChanged) {
        this.batchChanged = false;
        this.emit();
      }
    }
  }

  /** The nodes and edges as a JSON string (what undo/redo stores). */
  snapshot() {
    const { nodes, edges } = this.toJSON();
    return JSON.stringify({ nodes, edges });
  }

  /** Replace nodes and edges with a snapshot() string. */
  restore(snapshot, source = "history") {
    const data = JSON.parse(snapshot);
    this.nodes = data.nodes;
    this.edges = data.edges;
    this.emit("graph", { source });
  }

  spec(type) {
    return this.specs.get(type) || null;
  }

  /** The catalog label of a node type ("HTTP Request"); the type id when unknown. */
  typeLabel(type) {
    return this.spec(type)?.label || type;
  }

  node(id) {
    return this.nodes.find((n) => n.id === id) || null;
  }

  edge(id) {
    return this.edges.find((e) => e.id === id) || null;
  }

  displayLabel(node) {
    return node.label || this.typeLabel(node.type);
  }

  inputsOf(node) {
    if (isNote(node)) return [];
    const spec = this.spec(node.type);
    if (!spec) {
      const used = unique(this.edges.filter((e) => e.target === node.id).map((e) => e.target_port));
      if (used.length) return used;
      // Designer: an unknown type still gets an input; read-only views show none.
      return this.specs.size ? ["in"] : [];
    }
    if (spec.kind === "trigger") return [];
    return spec.inputs && spec.inputs.length ? [...spec.inputs] : ["in"];
  }

  outputsOf(node) {
    if (isNote(node)) return [];
    const spec = this.spec(node.type);
    if (!spec) {
      const used = unique(this.edges.filter((e) => e.source === node.id).map((e) => e.source_port));
      if (used.length) return used;
      return this.specs.size ? ["out"] : [];
    }
    const ports = [];
    if (spec.dynamic_outputs) {
      const dyn = node.config[spec.dynamic_outputs];
      if (Array.isArray(dyn)) {
        for (const item of dyn) {
          // Strings per the catalog contract; objects with a name/port are tolerated.
          const name = typeof item === "string" ? item : item && (item.port || item.name);
          if (name) ports.push(String(name));
        }
      }
    }
    ports.push(...(spec.outputs || []));
    if (node.config.on_error === "error_port") ports.push("error");
    return unique(ports);
  }

  nodeHeight(node) {
    if (isNote(node)) return NOTE_HEIGHT;
    const n = Math.max(this.inputsOf(node).length, this.outputsOf(node).length, 1);
    return Math.max(MIN_HEIGHT, 16 + n * PORT_SPACING);
  }

  /** Port centre relative to the node's top-left corner. */
  portOffset(node, side, port) {
    const ports = side === "in" ? this.inputsOf(node) : this.outputsOf(node);
    const h = this.nodeHeight(node);
    const i = ports.indexOf(port);
    if (i < 0) return { x: side === "in" ? 0 : NODE_WIDTH, y: h / 2, missing: true };
    return { x: side === "in" ? 0 : NODE_WIDTH, y: h / 2 + (i - (ports.length - 1) / 2) * PORT_SPACING };
  }

  /** `set_1`, `if_2` ...: the type's last segment plus the first free counter. */
  nextNodeId(type) {
    const base = (type.split(".").pop() || "node").replace(/[^A-Za-z0-9_]/g, "_").toLowerCase() || "node";
    const taken = new Set(this.nodes.map((n) => n.id));
    let i = 1;
    while (taken.has(`${base}_${i}`)) i++;
    return `${base}_${i}`;
  }

  nextEdgeId() {
    const taken = new Set(this.edges.map((e) => e.id));
    let i = 1;
    while (taken.has(`e_${i}`)) i++;
    return `e_${i}`;
  }

  addNode(type, x, y, config = {}) {
    const node = { id: this.nextNodeId(type), type, label: "", position: { x: Math.round(x), y: Math.round(y) }, config };
    this.nodes.push(node);
    this.emit();
    return node;
  }

  /** Move several nodes at once: moves is [{id, x, y}]; one change. */
  moveNodes(moves, { silent = false } = {}) {
    for (const { id, x, y } of moves) this.moveNode(id, x, y, { silent: true });
    if (!silent) this.emit();
  }

  /** Remove nodes (with their edges) and edges; one change. */
  removeMany(nodeIds, edgeIds = []) {
    const nodes = new Set(nodeIds);
    const edges = new Set(edgeIds);
    this.nodes = this.nodes.filter((n) => !nodes.has(n.id));
    this.edges = this.edges.filter((e) => !edges.has(e.id) && !nodes.has(e.source) && !nodes.has(e.target));
    this.emit();
  }

  /**
   * The given nodes and the edges between them, as a diagram fragment
   * ({nodes, edges}, deep copies) for the clipboard.
   */
  fragment(nodeIds) {
    const ids = new Set(nodeIds);
    const { nodes, edges } = JSON.parse(this.snapshot());
    return {
      nodes: nodes.filter((n) => ids.has(n.id)),
      edges: edges.filter((e) => ids.has(e.source) && ids.has(e.target)),
    };
  }

  /**
   * Add a fragment's nodes and edges with fresh ids, shifted by (dx, dy); one change.
   * Returns the new node ids. Edges whose ends are not in the fragment are dropped.
   */
  insertFragment(fragment, dx, dy) {
    const rename = new Map();
    const added = [];
    this.batch(() => {
      for (const n of fragment.nodes || []) {
        if (!n || typeof n.type !== "string") continue;
        const node = this.addNode(n.type, (Number(n.position?.x) || 0) + dx, (Number(n.position?.y) || 0) + dy, structuredClone(n.config || {}));
        node.label = typeof n.label === "string" ? n.label : "";
        rename.set(String(n.id), node.id);
        added.push(node.id);
      }
      for (const e of fragment.edges || []) {
        const s = rename.get(String(e.source));
        const t = rename.get(String(e.target));
        if (s && t) this.connect(s, e.source_port || "out", t, e.target_port || "in");
      }
    });
    return added;
  }

  moveNode(id, x, y, { silent = false } = {}) {
    const node = this.node(id);
    if (!node) return;
    node.position = { x: Math.round(x), y: Math.round(y) };
    if (!silent) this.emit();
  }

  /** Returns the new edge, or null when it would be a self-loop or a duplicate. */
  connect(source, sourcePort, target, targetPort) {
    if (source === target || !this.node(source) || !this.node(target)) return null;
    const dup = this.edges.some(
      (e) => e.source === source && e.source_port === sourcePort && e.target === target && e.target_port === targetPort,
    );
    if (dup) return null;
    const edge = { id: this.nextEdgeId(), source, source_port: sourcePort, target, target_port: targetPort };
    this.edges.push(edge);
    this.emit();
    return edge;
  }

  removeNode(id) {
    this.nodes = this.nodes.filter((n) => n.id !== id);
    this.edges = this.edges.filter((e) => e.source !== id && e.target !== id);
    this.emit();
  }

  removeEdge(id) {
    this.edges = this.edges.filter((e) => e.id !== id);
    this.emit();
  }

  /** ``unparsed``: field -> JSON text that does not parse ({} or null: none). */
  updateNode(id, { label, config, unparsed }) {
    const node = this.node(id);
    if (!node) return;
    if (label !== undefined) node.label = label;
    if (config !== undefined) node.config = config;
    if (unparsed !== undefined) {
      if (unparsedOf(unparsed)) node.unparsed = unparsedOf(unparsed);
      else delete node.unparsed;
    }
    this.emit("graph", { tag: `config:${id}` });
  }

  setViewport(vp) {
    this.viewport = { ...this.viewport, ...vp };
    this.emit("viewport");
  }

  toJSON() {
    return {
      nodes: this.nodes.map((n) => ({
        id: n.id,
        type: n.type,
        label: n.label,
        position: { x: n.position.x, y: n.position.y },
        config: n.config,
        ...(n.unbound ? { unbound: n.unbound } : {}),
        ...(n.unparsed ? { unparsed: n.unparsed } : {}),
      })),
      edges: this.edges.map((e) => ({
        id: e.id,
        source: e.source,
        source_port: e.source_port,
        target: e.target,
        target_port: e.target_port,
      })),
      viewport: { x: this.viewport.x, y: this.viewport.y, zoom: this.viewport.zoom },
      schema_version: this.schemaVersion,
    };
  }
}

function unique(list) {
  return [...new Set(list)];
}

/** ``value`` as {field: text} when it names at least one field, else null. */
function unparsedOf(value) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return null;
  const entries = Object.entries(value).filter(([, text]) => typeof text === "string");
  return entries.length ? Object.fromEntries(entries) : null;
}
