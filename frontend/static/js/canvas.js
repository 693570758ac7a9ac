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
// Mouse gestures live in canvas-input.js. The whole scene is re-rendered on every model
// change; while a drag or an animation runs only the moved nodes' transforms and their
// edges' paths are updated (moveInPlace), so a 500-node diagram still drags at 60 fps.
// The selection is a Selection (selection.js): several nodes and edges at once.

import { attachInput } from "./canvas-input.js";
import { edgePath } from "./edge-route.js";
import { drawIcon, iconName, pluginIconUrl } from "./icons.js";
import { isNote, NODE_WIDTH } from "./model.js";
import { Selection } from "./selection.js";
import { fitText, truncate, wrap } from "./text-fit.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const MIN_ZOOM = 0.1;
const MAX_ZOOM = 2.5;
export const GRID = 24; // canvas units between grid dots; snapping rounds to this
// Only what is near the view is drawn: the visible area plus this many view sizes around
// it. Panning further redraws. Below LOD_ZOOM, text is hidden (too small to read anyway):
// with hundreds of nodes, text is most of the painting time.
const CULL_MARGIN = 0.5;
export const LOD_ZOOM = 0.45;

function el(tag, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null && v !== false) node.setAttribute(k, String(v));
  }
  if (parent) parent.appendChild(node);
  return node;
}



export class Canvas {
  /**
   * @param {SVGSVGElement} svg
   * @param {import("./model.js").DiagramModel} model
   * @param {object} options
   *   readOnly: no editing (run view); locked: no editing but nodes are selected and
   *   focusable (the designer of a user who may not edit); onSelect(single selection {kind, id} | null, when
   *   the selection changed); onNodeClick(nodeId); onQuickAdd(sourceId, port, clientX,
   *   clientY, dropped) when a connection is dropped on empty canvas (dropped true) or an
   *   output port is clicked
   */
  constructor(svg, model, { readOnly = false, locked = false, onSelect = () => {}, onNodeClick = () => {}, onQuickAdd = () => {} } = {}) {
    this.svg = svg;
    this.model = model;
    this.readOnly = readOnly;
    this.locked = locked;
    this.onSelect = onSelect;
    this.onNodeClick = onNodeClick;
    this.onQuickAdd = onQuickAdd;
    this.sel = new Selection();
    this.snap = true; // snap moved nodes to the grid
    this.boxMode = false; // a plain drag on the background draws a selection box
    this.nodeEls = new Map(); // node id -> <g>
    this.edgeEls = new Map(); // edge id -> [hit path, visible path]
    this.diagnostics = new Map(); // node id -> [Diagnostic]
    this.edgeDiagnostics = new Map(); // edge id -> [Diagnostic]
    this.statuses = new Map(); // node id -> step status (read-only views)
    this.gesture = null;
    this.pointer = null; // {clientX, clientY} while the mouse is over the canvas
    this.prefix = svg.id || "canvas";
    this.build();
    this.bindEvents();
    // Pan and zoom only move the viewport group; content changes redraw the scene.
    model.onChange((kind) => (kind === "viewport" ? this.renderViewport() : this.render()));
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
    this.box = el("rect", { class: "select-box", visibility: "hidden" }, this.viewportGroup);
    this.proxy = el("path", { class: "layout-proxy", d: "" }, this.viewportGroup);
  }

  /**
   * While an animation moves many nodes, draw them as plain boxes in one path (one element
   * to repaint per frame instead of hundreds); boxes: [{x, y, h}]; null ends it.
   */
  drawProxy(boxes) {
    // display on the two layers, not a class on the <svg>: a class on the root restyles
    // every element under it, which alone costs more than the whole animation.
    for (const layer of [this.nodeLayer, this.edgeLayer]) {
      if (boxes) layer.setAttribute("display", "none");
      else layer.removeAttribute("display");
    }
    this.proxy.setAttribute("d", boxes ? boxes.map((b) => `M${b.x} ${b.y}h${NODE_WIDTH}v${b.h}h${-NODE_WIDTH}z`).join("") : "");
  }

  bindEvents() {
    attachInput(this);
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

  /** The canvas point under the pointer when it is over the canvas, else null. */
  pointerPoint() {
    return this.pointer ? this.screenToCanvas(this.pointer.clientX, this.pointer.clientY) : null;
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

  /** Pan and zoom so every node (or the given positions) is visible (zoom at most 1). */
  fit(padding = 40, positions = null) {
    const nodes = this.model.nodes;
    const r = this.svg.getBoundingClientRect();
    if (!nodes.length || !r.width || !r.height) return;
    let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    for (const n of nodes) {
      const p = positions?.get(n.id) || n.position;
      minX = Math.min(minX, p.x);
      minY = Math.min(minY, p.y);
      maxX = Math.max(maxX, p.x + NODE_WIDTH);
      maxY = Math.max(maxY, p.y + this.model.nodeHeight(n));
    }
    const zoom = Math.min(1, Math.max(MIN_ZOOM, Math.min((r.width - 2 * padding) / (maxX - minX), (r.height - 2 * padding) / (maxY - minY))));
    this.model.setViewport({
      zoom,
      x: (r.width - (maxX - minX) * zoom) / 2 - minX * zoom,
      y: (r.height - (maxY - minY) * zoom) / 2 - minY * zoom,
    });
  }

  /**
   * Fit the graph, but never below LOD_ZOOM, where the labels are no longer drawn: a graph
   * that fits only smaller is shown at LOD_ZOOM around the node ``focusId`` when given, else
   * with its left end (where a workflow starts: its trigger) ``padding`` px from the left
   * edge, vertically centred.
   */
  fitReadable(focusId = null, padding = 40) {
    this.fit(padding);
    const { zoom } = this.model.viewport;
    if (zoom >= LOD_ZOOM || !this.model.nodes.length) return;
    this.zoomAt(LOD_ZOOM / zoom);
    if (focusId) return this.centerOn(focusId);
    const minX = Math.min(...this.model.nodes.map((n) => n.position.x));
    this.model.setViewport({ x: padding - minX * this.model.viewport.zoom });
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

  /** Pan as little as needed for the node (with a margin for its ports) to be in view:
   * a node added beside one at the view's edge never lands where it cannot be reached. */
  reveal(nodeId, margin = 48) {
    const n = this.model.node(nodeId);
    if (!n) return;
    const r = this.svg.getBoundingClientRect();
    const { x, y, zoom } = this.model.viewport;
    const into = (at, size, span) => Math.min(0, span - margin - (at + size)) || Math.max(0, margin - at);
    const dx = into(x + n.position.x * zoom, NODE_WIDTH * zoom, r.width);
    const dy = into(y + n.position.y * zoom, this.model.nodeHeight(n) * zoom, r.height);
    if (dx || dy) this.model.setViewport({ x: x + dx, y: y + dy });
  }

  // ---------------------------------------------------------------- state setters

  /** The single selected item {kind, id}, or null when none or several are selected. */
  get selection() {
    return this.sel.single();
  }

  /** Select one item ({kind, id}) or nothing (null). */
  select(selection) {
    this.changeSelection(() => this.sel.only(selection?.kind, selection?.id));
  }

  /** Run fn(selection) to change the selection; re-render and tell onSelect when changed. */
  changeSelection(fn) {
    const before = this.sel.key();
    fn(this.sel);
    this.sel.prune(this.model);
    this.render();
    if (this.sel.key() !== before) this.onSelect(this.sel.single());
  }

  /** Round a canvas coordinate to the grid when snapping is on. */
  snapped(v) {
    return this.snap ? Math.round(v / GRID) * GRID : Math.round(v);
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

  // statuses: {nodeId: step status}; edgeStates: {edgeId: "taken" | "dead"} (run view);
  // notes: {nodeId: short text under the node, e.g. "2 attempts · 1.4 s"} (run overlay).
  setStatuses(map, edgeStates = {}, notes = {}) {
    this.statuses = new Map(Object.entries(map || {}));
    this.edgeStates = new Map(Object.entries(edgeStates || {}));
    this.runNotes = new Map(Object.entries(notes || {}));
    this.render();
  }

  // ---------------------------------------------------------------- rendering

  render() {
    this.sel.prune(this.model);
    this.renderViewport(false);
    this.drawRect = this.visibleRect(CULL_MARGIN);
    this.renderEdges();
    this.renderNodes();
  }

  /** Apply pan/zoom; redraw when the view left the area drawn last time. */
  renderViewport(redraw = true) {
    const { x, y, zoom } = this.model.viewport;
    this.viewportGroup.setAttribute("transform", `translate(${x} ${y}) scale(${zoom})`);
    this.gridPattern.setAttribute("patternTransform", `translate(${x} ${y}) scale(${zoom})`);
    const low = zoom < LOD_ZOOM;
    if (low !== this.svg.classList.contains("lod-low")) {
      this.svg.classList.toggle("lod-low", low);
      // Zoomed far out the grid dots would be a couple of pixels apart: tens of thousands
      // of dots to paint on every frame. The grid is left out there.
      this.bg.setAttribute("fill", low ? "transparent" : `url(#${this.prefix}-grid)`);
    }
    if (!redraw || this.drawRect === undefined) return;
    const view = this.visibleRect(0);
    const d = this.drawRect;
    if (view && (!d || view.x1 < d.x1 || view.y1 < d.y1 || view.x2 > d.x2 || view.y2 > d.y2)) this.render();
  }

  /** The visible area in canvas units, grown by ``margin`` view sizes; null if unknown. */
  visibleRect(margin) {
    const r = this.svg.getBoundingClientRect();
    if (!r.width || !r.height) return null;
    const { x, y, zoom } = this.model.viewport;
    const w = r.width / zoom;
    const h = r.height / zoom;
    const left = -x / zoom;
    const top = -y / zoom;
    return { x1: left - w * margin, y1: top - h * margin, x2: left + w * (1 + margin), y2: top + h * (1 + margin) };
  }

  /** Whether a node is drawn: near the view, or selected. */
  drawn(node) {
    const r = this.drawRect;
    if (!r || this.sel.has("node", node.id)) return true;
    const p = node.position;
    return p.x < r.x2 && p.x + NODE_WIDTH > r.x1 && p.y < r.y2 && p.y + this.model.nodeHeight(node) > r.y1;
  }

  /** Path data of an edge from the nodes' current positions. */
  edgeD(e, s, t) {
    const m = this.model;
    const a = m.portOffset(s, "out", e.source_port);
    const b = m.portOffset(t, "in", e.target_port);
    const below = Math.max(s.position.y + m.nodeHeight(s), t.position.y + m.nodeHeight(t));
    // End at the rim of the input port so the arrow head stays visible.
    return { d: edgePath(s.position.x + a.x, s.position.y + a.y, t.position.x + b.x - 8, t.position.y + b.y, below), a, b };
  }

  /**
   * Fast path for drags and animations: move the given nodes' <g> and re-route only the
   * edges touching them (positions are already in the model). With edges false the edges
   * are left alone (the auto-layout animation hides them and redraws at the end).
   */
  moveInPlace(ids, { edges = true } = {}) {
    const set = new Set(ids);
    for (const n of this.model.nodes) {
      const g = set.has(n.id) ? this.nodeEls.get(n.id) : null;
      if (g) g.setAttribute("transform", `translate(${n.position.x} ${n.position.y})`);
    }
    if (!edges) return;
    for (const e of this.model.edges) {
      if (!set.has(e.source) && !set.has(e.target)) continue;
      const paths = this.edgeEls.get(e.id);
      const s = this.model.node(e.source);
      const t = this.model.node(e.target);
      if (!paths || !s || !t) continue;
      const { d } = this.edgeD(e, s, t);
      paths[0].setAttribute("d", d);
      paths[1].setAttribute("d", d);
    }
  }

  renderEdges() {
    const m = this.model;
    this.edgeLayer.replaceChildren();
    this.edgeEls.clear();
    const byId = new Map(m.nodes.map((n) => [n.id, n]));
    const r = this.drawRect;
    for (const e of m.edges) {
      const s = byId.get(e.source);
      const t = byId.get(e.target);
      if (!s || !t) continue;
      if (r && !this.drawn(s) && !this.drawn(t)) {
        // Both ends away: drawn only when the edge may cross the area.
        const x1 = Math.min(s.position.x, t.position.x);
        const x2 = Math.max(s.position.x, t.position.x) + NODE_WIDTH;
        const y1 = Math.min(s.position.y, t.position.y);
        const y2 = Math.max(s.position.y, t.position.y) + 200;
        if (x1 > r.x2 || x2 < r.x1 || y1 > r.y2 || y2 < r.y1) continue;
      }
      const { d, a, b } = this.edgeD(e, s, t);
      const g = el("g", { class: "edge-group" }, this.edgeLayer);
      // A wide transparent path under the visible one makes edges easy to click.
      const hit = el("path", { d, class: "edge-hit", "data-edge-id": e.id }, g);
      const classes = ["edge"];
      if (this.sel.has("edge", e.id)) classes.push("selected");
      if (a.missing || b.missing) classes.push("edge-dangling");
      if (this.edgeDiagnostics.has(e.id)) classes.push("has-error");
      const edgeState = this.edgeStates?.get(e.id);
      if (edgeState) classes.push(`edge-${edgeState}`);
      const path = el("path", { d, class: classes.join(" "), "data-edge-id": e.id, "marker-end": `url(#${this.prefix}-arrow)` }, g);
      this.edgeEls.set(e.id, [hit, path]);
      const diags = this.edgeDiagnostics.get(e.id);
      if (diags) el("title", {}, path).textContent = diags.map((x) => x.message).join("\n");
    }
  }

  renderNodes() {
    const m = this.model;
    this.nodeLayer.replaceChildren();
    this.nodeEls.clear();
    for (const node of m.nodes) {
      if (!this.drawn(node)) continue;
      if (isNote(node)) {
        this.renderNote(node);
        continue;
      }
      const spec = m.spec(node.type);
      const h = m.nodeHeight(node);
      const kind = spec?.kind || (m.specs.size ? "unknown" : "step");
      const classes = ["node", `kind-${kind}`];
      if (this.sel.has("node", node.id)) classes.push("selected");
      const diags = this.diagnostics.get(node.id);
      // warnings only (what runs would ignore): amber, not red
      const onlyWarnings = diags && diags.every((d) => d.severity === "warning");
      if (diags) classes.push(onlyWarnings ? "has-warning" : "has-error");
      const status = this.statuses.get(node.id);
      if (this.statuses.size) classes.push(`status-${status || "pending"}`);
      const g = el("g", {
        class: classes.join(" "),
        "data-node-id": node.id,
        "data-type": node.type,
        "data-status": this.statuses.size ? status || "pending" : null,
        transform: `translate(${node.position.x} ${node.position.y})`,
        tabindex: this.readOnly ? null : 0,
        role: this.readOnly ? null : "button",
      }, this.nodeLayer);
      this.nodeEls.set(node.id, g);

      el("rect", { class: "node-body", width: NODE_WIDTH, height: h, rx: 10, ry: 10 }, g);
      if (status === "skipped") {
        el("rect", { class: "node-hatch", width: NODE_WIDTH, height: h, rx: 10, ry: 10, fill: `url(#${this.prefix}-hatch)` }, g);
      }
      el("rect", { class: "node-accent", x: 0, y: 0, width: 5, height: h, rx: 2 }, g);
      const glyph = iconName(spec);
      const iconClass = pluginIconUrl(glyph) ? "node-icon has-image" : "node-icon";
      const icon = el("g", { class: iconClass, transform: `translate(24 ${h / 2})` }, g);
      el("circle", { r: 13 }, icon);
      drawIcon(icon, glyph, spec?.label || node.type.split(".").pop(), 16);

      const outputs = m.outputsOf(node);
      const textPx = NODE_WIDTH - 44 - (outputs.length > 1 ? 48 : 14); // leave room for port names
      // Subtitle: the node type's label under a custom label, else the step id (what
      // expressions refer to); type ids stay in the tooltip.
      const typeLabel = m.typeLabel(node.type);
      const shownLabel = fitText(m.displayLabel(node), textPx, "600 13px");
      const shownSub = node.label ? fitText(typeLabel, textPx, "11px") : truncate(node.id, Math.floor(textPx / 6.7)); // step ids are in the 11 px monospace font
      // The accessible name starts with the texts as shown (WCAG 2.5.3, label in name; the
      // names of several output ports are drawn texts too), then says in full what they
      // cut; each text ends with a space so they read as words (SVG draws none).
      const full = [shownLabel !== m.displayLabel(node) ? m.displayLabel(node) : "", node.label ? "" : typeLabel].filter(Boolean);
      const portNames = outputs.length > 1 ? ` ${outputs.map((port) => truncate(port, 10)).join(" ")}` : "";
      // the run note ("2 attempts · 1.4 s") and the problem badge's count are drawn texts too
      const runNote = this.runNotes?.get(node.id);
      const drawn = `${portNames}${runNote ? ` ${runNote}` : ""}${diags ? ` ${diags.length} ${diags.length === 1 ? "problem" : "problems"}` : ""}`;
      g.setAttribute("aria-label", `${shownLabel} ${shownSub}${drawn}${full.length ? `, ${full.join(", ")}` : ""}`);
      el("text", { class: "node-label", x: 44, y: h / 2 - 6, "dominant-baseline": "middle", "aria-hidden": "true" }, g).textContent = `${shownLabel} `;
      el("text", { class: node.label ? "node-sub node-sub-type" : "node-sub", x: 44, y: h / 2 + 11, "dominant-baseline": "middle", "aria-hidden": "true" }, g).textContent = `${shownSub} `;
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
          el("text", { class: `port-name${port === "error" ? " port-name-error" : ""}`, x: p.x - 12, y: p.y, "text-anchor": "end", "dominant-baseline": "central", "aria-hidden": "true" }, g).textContent = `${truncate(port, 10)} `;
        }
        el("circle", { class: `port port-out${port === "error" ? " port-error" : ""}`, "data-port": port, cx: p.x, cy: p.y, r: 7 }, g);
      }

      if (runNote) {
        el("text", { class: "node-run-note", x: NODE_WIDTH, y: h + 13, "text-anchor": "end", "aria-hidden": "true" }, g).textContent = `${runNote} `;
      }

      if (diags) {
        const badge = el("g", { class: onlyWarnings ? "error-badge warning-badge" : "error-badge", transform: `translate(${NODE_WIDTH - 2} 2)` }, g);
        el("circle", { r: 10 }, badge);
        el("text", { "text-anchor": "middle", "dominant-baseline": "central", "aria-hidden": "true" }, badge).textContent = String(diags.length);
        el("title", {}, badge).textContent = diags.map((d) => d.message).join("\n");
      }
    }
  }

  /** A sticky note: a yellow card with the note's text, wrapped to its width. */
  renderNote(node) {
    const h = this.model.nodeHeight(node);
    const classes = ["node", "note"];
    if (this.sel.has("node", node.id)) classes.push("selected");
    const color = /^[a-z]+$/.test(node.config?.color || "") ? node.config.color : "yellow";
    classes.push(`note-${color}`);
    const text = String(node.config?.text || "");
    const g = el("g", {
      class: classes.join(" "),
      "data-node-id": node.id,
      "data-type": node.type,
      transform: `translate(${node.position.x} ${node.position.y})`,
      tabindex: this.readOnly ? null : 0,
      role: this.readOnly ? null : "button",
    }, this.nodeLayer);
    this.nodeEls.set(node.id, g);
    el("rect", { class: "node-body note-body", width: NODE_WIDTH, height: h, rx: 4, ry: 4 }, g);
    const lines = wrap(text || "Empty note: select it to write", 30, 6);
    g.setAttribute("aria-label", `${lines.join(" ")}, sticky note`);
    lines.forEach((line, i) => {
      el("text", { class: text ? "note-text" : "note-text note-empty", x: 12, y: 22 + i * 16, "aria-hidden": "true" }, g).textContent = `${line} `;
    });
    el("title", {}, g).textContent = text || "Sticky note";
  }

  highlightDropTarget(nodeEl, source) {
    for (const n of this.nodeLayer.querySelectorAll(".node.drop-target")) n.classList.remove("drop-target");
    if (nodeEl && nodeEl.dataset.nodeId !== source) nodeEl.classList.add("drop-target");
  }

  /** Show the selection box (canvas units) or hide it (null). */
  showBox(rect) {
    if (!rect) {
      this.box.setAttribute("visibility", "hidden");
      return;
    }
    this.box.setAttribute("visibility", "visible");
    this.box.setAttribute("x", Math.min(rect.x1, rect.x2));
    this.box.setAttribute("y", Math.min(rect.y1, rect.y2));
    this.box.setAttribute("width", Math.abs(rect.x2 - rect.x1));
    this.box.setAttribute("height", Math.abs(rect.y2 - rect.y1));
  }

  /** Draft path of a connection being drawn, or "" to hide it. */
  showDraft(d) {
    this.draft.setAttribute("d", d);
  }

  /** Path data of a connection from a port to a canvas point. */
  draftPath(sourceId, port, p) {
    const s = this.model.node(sourceId);
    const a = this.model.portOffset(s, "out", port);
    return edgePath(s.position.x + a.x, s.position.y + a.y, p.x, p.y);
  }
}

function push(map, key, value) {
  if (!map.has(key)) map.set(key, []);
  map.get(key).push(value);
}
