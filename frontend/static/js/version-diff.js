// The diff view (templates/version_diff.html): two read-only canvases, the older diagram on
// top with removed and changed nodes highlighted, the newer under it with added and
// changed ones; connections likewise. Each side (the page's full width: workflows are
// wide) fits its whole graph whenever the labels are still drawn at that zoom, else shows
// the first change at that smallest readable zoom; a click on a change in the list (or on
// a node) zooms to that node on both sides. The diff itself is computed on the server
// (designer_schema/diff.py) and handed over in data-diff.

import { Canvas } from "./canvas.js";
import { DiagramModel } from "./model.js";

const root = document.getElementById("diff-view");
const parse = (name, fallback) => {
  try {
    return JSON.parse(root.dataset[name] || "");
  } catch {
    return fallback;
  }
};
const before = parse("before", {});
const after = parse("after", {});
const diff = parse("diff", { nodes: [], edges: [] });
const catalog = parse("catalog", []);

/**
 * Node and edge states of one side: {nodes: {id: state}, edges: {id: state}}, state being
 * "added" | "removed" | "changed" | "same".
 * @param {object} diagram  the side's Diagram
 * @param {"before" | "after"} side
 */
export function sideStates(diagram, changes, side) {
  const shown = side === "before" ? new Set(["removed", "changed"]) : new Set(["added", "changed"]);
  const nodes = {};
  for (const n of diagram.nodes || []) nodes[n.id] = "same";
  for (const c of changes.nodes || []) if (shown.has(c.kind) && c.id in nodes) nodes[c.id] = c.kind;
  const edges = {};
  for (const e of diagram.edges || []) edges[e.id] = "same";
  const edgeKind = side === "before" ? "removed" : "added";
  for (const c of changes.edges || []) if (c.kind === edgeKind && c.id in edges) edges[c.id] = c.kind;
  return { nodes, edges };
}

function draw(svgId, diagram, side) {
  const svg = document.getElementById(svgId);
  const model = new DiagramModel(diagram, catalog);
  const canvas = new Canvas(svg, model, { readOnly: true, onNodeClick: (id) => focusNode(id) });
  const states = sideStates(diagram, diff, side);
  canvas.setStatuses(states.nodes, states.edges);
  return canvas;
}

// A change clicked is shown at FOCUS_ZOOM.
const FOCUS_ZOOM = 1;

/**
 * Fit a side to its graph; when that is below the zoom where labels are drawn, show it at
 * that zoom around the first change on that side (else its first node).
 */
function fitReadable(canvas, side) {
  if (!canvas.model.nodes.length) return;
  const states = sideStates(side === "before" ? before : after, diff, side).nodes;
  const changed = Object.keys(states).find((id) => states[id] !== "same");
  canvas.fitReadable(changed || canvas.model.nodes[0].id);
}

const canvases = [draw("diff-before", before, "before"), draw("diff-after", after, "after")];
const sides = ["before", "after"];
// after layout: a canvas measured before its box has its size fits to nothing
const fitAll = () => canvases.forEach((canvas, i) => fitReadable(canvas, sides[i]));
fitAll();
requestAnimationFrame(fitAll);

/** Zoom to the node on each side that has it, outline it, and mark its entry in the list. */
function focusNode(nodeId) {
  for (const canvas of canvases) {
    for (const g of canvas.svg.querySelectorAll(".node.focused")) g.classList.remove("focused");
    if (!canvas.model.node(nodeId)) continue;
    const { zoom } = canvas.model.viewport;
    if (zoom < FOCUS_ZOOM) canvas.zoomAt(FOCUS_ZOOM / zoom);
    canvas.centerOn(nodeId);
    canvas.svg.querySelector(`.node[data-node-id="${CSS.escape(nodeId)}"]`)?.classList.add("focused");
  }
  for (const li of document.querySelectorAll("#change-list .change")) {
    li.classList.toggle("current", li.dataset.nodeId === nodeId);
  }
}

for (const button of document.querySelectorAll("[data-focus-node]")) {
  button.addEventListener("click", () => focusNode(button.dataset.focusNode));
}

window.railyardDiff = { canvases, diff, focusNode }; // for e2e tests
