// Edge paths between an output port (x1, y1) and an input port (x2, y2), in canvas units.
//
// Forward edges are a horizontal S-curve. An edge whose target lies left of (or close to)
// its source would curve back through both nodes and hide behind them, so it is routed
// around them instead: out to the right, along a lane under the lower of the two nodes,
// and back in from the left, with rounded corners.

const LANE_GAP = 28;
const RADIUS = 12;
const STUB = 24;

/**
 * @param {number} x1 @param {number} y1  start (output port centre)
 * @param {number} x2 @param {number} y2  end (input port rim)
 * @param {number} [below]  lowest canvas y of the two nodes (for the backward lane)
 * @returns {string} SVG path data
 */
export function edgePath(x1, y1, x2, y2, below) {
  if (below === undefined || x2 >= x1 + 2 * STUB) {
    const dx = Math.max(40, Math.abs(x2 - x1) / 2);
    return `M ${x1} ${y1} C ${x1 + dx} ${y1}, ${x2 - dx} ${y2}, ${x2} ${y2}`;
  }
  const lane = Math.max(below, y1, y2) + LANE_GAP;
  const right = x1 + STUB;
  const left = x2 - STUB;
  const r = RADIUS;
  return [
    `M ${x1} ${y1}`,
    `H ${right - r}`,
    `Q ${right} ${y1} ${right} ${y1 + r}`,
    `V ${lane - r}`,
    `Q ${right} ${lane} ${right - r} ${lane}`,
    `H ${left + r}`,
    `Q ${left} ${lane} ${left} ${lane - r}`,
    `V ${y2 + r}`,
    `Q ${left} ${y2} ${left + r} ${y2}`,
    `H ${x2}`,
  ].join(" ");
}
