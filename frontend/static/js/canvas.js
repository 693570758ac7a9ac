// SVG rendering of a DiagramModel, plus the mouse interactions of the editor.
//
// Structure inside the <svg>:
//   <defs> grid + hatch patterns, arrow marker
//   rect.canvas-bg                      background: drag to pan
//   g.viewport[transform]               pan/zoom
//     g.edges   > g.edge-group > path.edge-hit + path.edge[data-edge-id]
//     path.edge-draft                   while connecting
//     g.nodes   > g.node[data-node-id][data-type] > rect.node-body, text, circle.port ...
//
// Mouse handling uses mousedown/mousemove/mouseup (not pointer capture) so that synthetic
// mouse input (Playwright) drives it like a person would. The whole scene is re-rendered on
// every change: diagrams are small and this keeps the code simple.

import { NODE_WIDTH } from "./model.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const MIN_ZOOM = 0.25;
const MAX_ZOOM = 2.5;
const DRAG_THRESHOLD = 3; // px before a mousedown counts as a drag rather than a click

function el(tag, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null && v !== false) node.setAttribute(k, String(v));
  }
  if (parent) parent.appendChild(node);
  return node;
}

function truncate(text, max) {
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

function edgePath(x1, y1, x2, y2) {
  const dx = Math.max(40, Math.abs(x2 - x1) / 2);
  return `M ${x1} ${y1} C ${x1 + dx} ${y1}, ${x2 - dx} ${y2}, ${x2} ${y2}`;
}

export class Canvas {
  /**
   * @param {SVGSVGElement} svg
   * @param {import("./model.js").DiagramModel} model
   * @param {object} options
   *   readOnly: no editing (run view); onSelect(selection|null); onNodeClick(nodeId)
   */
  constructor(svg, model, { readOnly = false, onSelect = () => {}, onNodeClick = () => {} } = {}) {
    this.svg = svg;
    this.model = model;
    this.readOnly = readOnly;
    this.onSelect = onSelect;
    this.onNodeClick = onNodeClick;
    this.selection = null; // {kind: "node"|"edge", id}
    this.diagnostics = new Map(); // node id -> [Diagnostic]
    this.edgeDiagnostics = new Map(); // edge id -> [Diagnostic]
    this.statuses = new Map(); // node id -> step status (read-only views)
    this.gesture = null;
    this.prefix = svg.id || "canvas";
    this.build();
    this.bindEvents();
    model.onChange(() => this.render());
    this.render();
  }

  build() {
    const svg = this.svg;
    svg.replaceChildren();
    svg.classList.add("graph-canvas");
    const defs = el("defs", {}, svg);
    const grid = el("pattern", { id: `${this.prefix}-grid`, width: 24, height: 24, patternUnits: "userSpaceOnUse" }, defs);
    el("circle", { cx: 1, cy: 1, r: 1, class: "grid-dot" }, grid);
    this.gridPattern = grid;
    const hatch = el("pattern", { id: `${this.prefix}-hatch`, width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, defs);
    el("rect", { width: 8, height: 8, class: "hatch-bg" }, hatch);
    el("line", { x1: 0, y1: 0, x2: 0, y2: 8, class: "hatch-line" }, hatch);
    const marker = el("marker", { id: `${this.prefix}-arrow`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }, marker);

    this.bg = el("rect", { class: "canvas-bg", width: "100%", height: "100%", fill: `url(#${this.prefix}-grid)` }, svg);
    this.viewportGroup = el("g", { class: "viewport" }, svg);
    this.edgeLayer = el("g", { class: "edges" }, this.viewportGroup);
    this.draft = el("path", { class: "edge-draft", d: "" }, this.viewportGroup);
    this.nodeLayer = el("g", { class: "nodes" }, this.viewportGroup);
  }

  // ---------------------------------------------------------------- coordinates

  screenToCanvas(clientX, clientY) {
    const r = this.svg.getBoundingClientRect();
    const { x, y, zoom } = this.model.viewport;
    return { x: (clientX - r.left - x) / zoom, y: (clientY - r.top - y) / zoom };
  }

  /** Canvas coordinates of the middle of the visible area. */
  visibleCenter() {
    const r = this.svg.getBoundingClientRect();
    return this.screenToCanvas(r.left + r.width / 2, r.top + r.height / 2);
  }

  zoomAt(factor, clientX, clientY) {
    const vp = this.model.viewport;
    const zoom = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, vp.zoom * factor));
    const r = this.svg.getBoundingClientRect();
    const cx = clientX === undefined ? r.width / 2 : clientX - r.left;
    const cy = clientY === undefined ? r.height / 2 : clientY - r.top;
    // Keep the canvas point under the cursor where it is.
    const px = (cx - vp.x) / vp.zoom;
    const py = (cy - vp.y) / vp.zoom;
    this.model.setViewport({ zoom, x: cx - px * zoom, y: cy - py * zoom });
  }

  /** Pan and zoom so every node is visible (zoom at most 1). */
  fit(padding = 40) {
    const nodes = this.model.nodes;
    const r = this.svg.getBoundingClientRect();
    if (!nodes.length || !r.width || !r.height) return;
    let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    for (const n of nodes) {
      minX = Math.min(minX, n.position.x);
      minY = Math.min(minY, n.position.y);
      maxX = Math.max(maxX, n.position.x + NODE_WIDTH);
      maxY = Math.max(maxY, n.position.y + this.model.nodeHeight(n));
    }
    const zoom = Math.min(1, Math.max(MIN_ZOOM, Math.min((r.width - 2 * padding) / (maxX - minX), (r.height - 2 * padding) / (maxY - minY))));
    this.model.setViewport({
      zoom,
      x: (r.width - (maxX - minX) * zoom) / 2 - minX * zoom,
      y: (r.height - (maxY - minY) * zoom) / 2 - minY * zoom,
    });
  }

  /** Pan so that the node is in the middle of the view. */
  centerOn(nodeId) {
    const n = this.model.node(nodeId);
    if (!n) return;
    const r = this.svg.getBoundingClientRect();
    const { zoom } = this.model.viewport;
    this.model.setViewport({
      x: r.width / 2 - (n.position.x + NODE_WIDTH / 2) * zoom,
      y: r.height / 2 - (n.position.y + this.model.nodeHeight(n) / 2) * zoom,
    });
  }

  // ---------------------------------------------------------------- state setters

  select(selection) {
    const same = JSON.stringify(selection) === JSON.stringify(this.selection);
    this.selection = selection;
    this.render();
    if (!same) this.onSelect(selection);
  }

  setDiagnostics(list) {
    this.diagnostics = new Map();
    this.edgeDiagnostics = new Map();
    for (const d of list || []) {
      if (d.node_id) push(this.diagnostics, d.node_id, d);
      else if (d.edge_id) push(this.edgeDiagnostics, d.edge_id, d);
    }
    this.render();
  }

  // statuses: {nodeId: step status}; edgeStates: {edgeId: "taken" | "dead"} (run view).
  setStatuses(map, edgeStates = {}) {
    this.statuses = new Map(Object.entries(map || {}));
    this.edgeStates = new Map(Object.entries(edgeStates || {}));
    this.render();
  }

  // ---------------------------------------------------------------- rendering

  render() {
    const { x, y, zoom } = this.model.viewport;
    this.viewportGroup.setAttribute("transform", `translate(${x} ${y}) scale(${zoom})`);
    this.gridPattern.setAttribute("patternTransform", `translate(${x} ${y}) scale(${zoom})`);
    this.renderEdges();
    this.renderNodes();
  }

  renderEdges() {
    const m = this.model;
    this.edgeLayer.replaceChildren();
    for (const e of m.edges) {
      const s = m.node(e.source);
      const t = m.node(e.target);
      if (!s || !t) continue;
      const a = m.portOffset(s, "out", e.source_port);
      const b = m.portOffset(t, "in", e.target_port);
      // End at the rim of the input port so the arrow head stays visible.
      const d = edgePath(s.position.x + a.x, s.position.y + a.y, t.position.x + b.x - 8, t.position.y + b.y);
      const g = el("g", { class: "edge-group" }, this.edgeLayer);
      // A wide transparent path under the visible one makes edges easy to click.
      el("path", { d, class: "edge-hit", "data-edge-id": e.id }, g);
      const classes = ["edge"];
      if (this.selection?.kind === "edge" && this.selection.id === e.id) classes.push("selected");
      if (a.missing || b.missing) classes.push("edge-dangling");
      if (this.edgeDiagnostics.has(e.id)) classes.push("has-error");
      const edgeState = this.edgeStates?.get(e.id);
      if (edgeState) classes.push(`edge-${edgeState}`);
      const path = el("path", { d, class: classes.join(" "), "data-edge-id": e.id, "marker-end": `url(#${this.prefix}-arrow)` }, g);
      const diags = this.edgeDiagnostics.get(e.id);
      if (diags) el("title", {}, path).textContent = diags.map((x) => x.message).join("\n");
    }
  }

  renderNodes() {
    const m = this.model;
    this.nodeLayer.replaceChildren();
    for (const node of m.nodes) {
      const spec = m.spec(node.type);
      const h = m.nodeHeight(node);
      const kind = spec?.kind || (m.specs.size ? "unknown" : "step");
      const classes = ["node", `kind-${kind}`];
      if (this.selection?.kind === "node" && this.selection.id === node.id) classes.push("selected");
      const diags = this.diagnostics.get(node.id);
      if (diags) classes.push("has-error");
      const status = this.statuses.get(node.id);
      if (this.statuses.size) classes.push(`status-${status || "pending"}`);
      const g = el("g", {
        class: classes.join(" "),
        "data-node-id": node.id,
        "data-type": node.type,
        "data-status": this.statuses.size ? status || "pending" : null,
        transform: `translate(${node.position.x} ${node.position.y})`,
      }, this.nodeLayer);

      el("rect", { class: "node-body", width: NODE_WIDTH, height: h, rx: 10, ry: 10 }, g);
      if (status === "skipped") {
        el("rect", { class: "node-hatch", width: NODE_WIDTH, height: h, rx: 10, ry: 10, fill: `url(#${this.prefix}-hatch)` }, g);
      }
      el("rect", { class: "node-accent", x: 0, y: 0, width: 5, height: h, rx: 2 }, g);
      const icon = el("g", { class: "node-icon", transform: `translate(24 ${h / 2})` }, g);
      el("circle", { r: 13 }, icon);
      el("text", { "text-anchor": "middle", "dominant-baseline": "central" }, icon).textContent = iconText(spec, node);

      const outputs = m.outputsOf(node);
      const textWidth = outputs.length > 1 ? 17 : 22; // leave room for port names
      el("text", { class: "node-label", x: 44, y: h / 2 - 6, "dominant-baseline": "middle" }, g).textContent = truncate(m.displayLabel(node), textWidth);
      // Subtitle: the node type's label under a custom label, else the step id (what
      // expressions refer to); type ids stay in the tooltip.
      const typeLabel = m.typeLabel(node.type);
      el("text", { class: node.label ? "node-sub node-sub-type" : "node-sub", x: 44, y: h / 2 + 11, "dominant-baseline": "middle" }, g).textContent = truncate(node.label ? typeLabel : node.id, textWidth + 2);
      el("title", {}, g).textContent = [
        m.displayLabel(node),
        `${typeLabel} (${node.type})`,
        `Step id: ${node.id}`,
        status ? `status: ${status}` : "",
        ...(diags || []).map((d) => `⚠ ${d.message}`),
      ].filter(Boolean).join("\n");

      for (const port of m.inputsOf(node)) {
        const p = m.portOffset(node, "in", port);
        el("circle", { class: "port port-in", "data-port": port, cx: p.x, cy: p.y, r: 7 }, g);
      }
      for (const port of outputs) {
        const p = m.portOffset(node, "out", port);
        if (outputs.length > 1) {
          el("text", { class: `port-name${port === "error" ? " port-name-error" : ""}`, x: p.x - 12, y: p.y, "text-anchor": "end", "dominant-baseline": "central" }, g).textContent = truncate(port, 10);
        }
        el("circle", { class: `port port-out${port === "error" ? " port-error" : ""}`, "data-port": port, cx: p.x, cy: p.y, r: 7 }, g);
      }

      if (diags) {
        const badge = el("g", { class: "error-badge", transform: `translate(${NODE_WIDTH - 2} 2)` }, g);
        el("circle", { r: 10 }, badge);
        el("text", { "text-anchor": "middle", "dominant-baseline": "central" }, badge).textContent = String(diags.length);
        el("title", {}, badge).textContent = diags.map((d) => d.message).join("\n");
      }
    }
  }

  // ---------------------------------------------------------------- interactions

  bindEvents() {
    this.svg.addEventListener("mousedown", (e) => this.onMouseDown(e));
    this.svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      this.zoomAt(e.deltaY < 0 ? 1.1 : 1 / 1.1, e.clientX, e.clientY);
    }, { passive: false });
    window.addEventListener("mousemove", (e) => this.onMouseMove(e));
    window.addEventListener("mouseup", (e) => this.onMouseUp(e));
  }

  onMouseDown(e) {
    if (e.button !== 0) return;
    const target = e.target;
    const nodeEl = target.closest(".node");
    const start = { clientX: e.clientX, clientY: e.clientY, moved: false };

    if (!this.readOnly && target.classList.contains("port-out") && nodeEl) {
      e.preventDefault();
      this.gesture = { ...start, type: "connect", source: nodeEl.dataset.nodeId, port: target.dataset.port };
      this.svg.classList.add("connecting");
      return;
    }
    if (nodeEl) {
      e.preventDefault();
      const node = this.model.node(nodeEl.dataset.nodeId);
      this.gesture = { ...start, type: "move", id: node.id, origin: { ...node.position } };
      if (!this.readOnly) this.select({ kind: "node", id: node.id });
      return;
    }
    const edgeId = target.dataset?.edgeId;
    if (edgeId && !this.readOnly) {
      e.preventDefault();
      this.select({ kind: "edge", id: edgeId });
      return;
    }
    // Background: pan.
    e.preventDefault();
    this.svg.focus({ preventScroll: true });
    this.gesture = { ...start, type: "pan", origin: { x: this.model.viewport.x, y: this.model.viewport.y } };
    this.svg.classList.add("panning");
  }

  onMouseMove(e) {
    const g = this.gesture;
    if (!g) return;
    const dx = e.clientX - g.clientX;
    const dy = e.clientY - g.clientY;
    if (!g.moved && Math.hypot(dx, dy) < DRAG_THRESHOLD) return;
    g.moved = true;
    const zoom = this.model.viewport.zoom;
    if (g.type === "pan") {
      this.model.setViewport({ x: g.origin.x + dx, y: g.origin.y + dy });
    } else if (g.type === "move" && !this.readOnly) {
      this.model.moveNode(g.id, g.origin.x + dx / zoom, g.origin.y + dy / zoom, { silent: true });
      this.render();
    } else if (g.type === "connect") {
      const s = this.model.node(g.source);
      const a = this.model.portOffset(s, "out", g.port);
      const p = this.screenToCanvas(e.clientX, e.clientY);
      this.draft.setAttribute("d", edgePath(s.position.x + a.x, s.position.y + a.y, p.x, p.y));
      const hover = document.elementFromPoint(e.clientX, e.clientY);
      this.highlightDropTarget(hover && hover.closest ? hover.closest(".node") : null);
    }
  }

  onMouseUp(e) {
    const g = this.gesture;
    if (!g) return;
    this.gesture = null;
    this.svg.classList.remove("connecting", "panning");
    this.draft.setAttribute("d", "");
    this.highlightDropTarget(null);

    if (g.type === "connect") {
      const hit = document.elementFromPoint(e.clientX, e.clientY);
      const nodeEl = hit && hit.closest ? hit.closest(".node") : null;
      if (!nodeEl || nodeEl.dataset.nodeId === g.source) return;
      const target = this.model.node(nodeEl.dataset.nodeId);
      // Dropping on an input port uses that port; on the body, the node's first input.
      const port = hit.classList.contains("port-in") ? hit.dataset.port : this.model.inputsOf(target)[0];
      if (!port) return;
      const edge = this.model.connect(g.source, g.port, target.id, port);
      if (edge) this.select({ kind: "edge", id: edge.id });
    } else if (g.type === "move") {
      if (g.moved && !this.readOnly) this.model.emit(); // one change per drag, not per pixel
      else this.onNodeClick(g.id);
    } else if (g.type === "pan" && !g.moved && !this.readOnly) {
      this.select(null);
    }
  }

  highlightDropTarget(nodeEl) {
    for (const n of this.nodeLayer.querySelectorAll(".node.drop-target")) n.classList.remove("drop-target");
    if (nodeEl && this.gesture && nodeEl.dataset.nodeId !== this.gesture.source) nodeEl.classList.add("drop-target");
  }
}

function push(map, key, value) {
  if (!map.has(key)) map.set(key, []);
  map.get(key).push(value);
}

function iconText(spec, node) {
  const icon = spec?.icon || "";
  // Short icons (an emoji or a letter or two) are shown as they are; icon names are not.
  if (icon && [...icon].length <= 2) return icon;
  const label = spec?.label || node.type.split(".").pop() || "?";
  return label.charAt(0).toUpperCase();
}
