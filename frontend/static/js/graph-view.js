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
export function renderGraph(svg, diagram, { statuses = {}, catalog = [], onNodeClick } = {}) {
  const model = new DiagramModel(diagram, catalog);
  const canvas = new Canvas(svg, model, { readOnly: true, onNodeClick });
  canvas.setStatuses(statuses);
  canvas.fit();
  return canvas;
}
