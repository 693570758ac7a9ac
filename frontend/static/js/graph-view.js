// Read-only diagram view (run detail page): the designer's canvas without editing,
// nodes coloured by step status. Pan and zoom still work.

import { Canvas } from "./canvas.js";
import { DiagramModel } from "./model.js";

/**
 * @param {SVGSVGElement} svg
 * @param {object} diagram  a Diagram
 * @param {object} options  statuses: {nodeId: status}, catalog: NodeTypeSpec[] (optional;
 *   without it ports are derived from the edges), onNodeClick(nodeId)
 */
export function renderGraph(svg, diagram, { statuses = {}, ports = {}, catalog = [], onNodeClick } = {}) {
  const model = new DiagramModel(diagram, catalog);
  const canvas = new Canvas(svg, model, { readOnly: true, onNodeClick });
  canvas.setStatuses(statuses, edgeStates(diagram, statuses, ports));
  canvas.fit();
  return canvas;
}

const DEAD_SOURCES = new Set(["skipped", "cancelled"]);

/**
 * Which edges a run took: "taken" when the source step finished through the edge's port,
 * "dead" when the source finished through other ports (a branch not taken), was skipped or
 * cancelled, or failed the run; undecided edges (source not finished) are left out.
 * @param {object} diagram  a Diagram
 * @param {object} statuses {nodeId: step status}
 * @param {object} ports    {nodeId: [port taken, ...]}
 * @returns {object} {edgeId: "taken" | "dead"}
 */
export function edgeStates(diagram, statuses, ports) {
  const out = {};
  for (const e of diagram.edges || []) {
    const status = statuses[e.source];
    const taken = ports[e.source] || [];
    if (status === "succeeded" || status === "failed") {
      out[e.id] = taken.includes(e.source_port) ? "taken" : "dead";
    } else if (DEAD_SOURCES.has(status)) {
      out[e.id] = "dead";
    }
  }
  return out;
}
