// Where a new node goes: free space next to its anchor, never on top of another node.
//
// Every way of adding nodes (quick-add, palette click and drop, insert on edge, paste,
// notes, duplicate) asks freeSpot() or freeOffset(); inserting on an edge first makes room
// by shifting the nodes downstream of the edge to the right (as n8n does). Rectangles are
// the nodes' boxes (NODE_WIDTH x model.nodeHeight) grown by GAP on every side, so ports,
// port names and run notes under a node stay clear too. Coordinates are canvas units.

import { NODE_WIDTH } from "./model.js";

export const GAP = 24; // one grid step of clear space around every node
export const COLUMN = NODE_WIDTH + 80; // from one node's left edge to the next one's in a chain
const GRID = 24;
const MAX_RINGS = 60; // search radius in grid steps (1440 units) before giving up on "near"

/** The box of a node: {x, y, w, h}. */
export function nodeBox(model, node) {
  return { x: node.position.x, y: node.position.y, w: NODE_WIDTH, h: model.nodeHeight(node) };
}

/** Whether two boxes overlap once each is grown by ``gap``. */
export function overlaps(a, b, gap = GAP) {
  return a.x < b.x + b.w + gap && b.x < a.x + a.w + gap && a.y < b.y + b.h + gap && b.y < a.y + a.h + gap;
}

function blocked(boxes, box) {
  return boxes.some((b) => overlaps(box, b));
}

/**
 * The free top-left corner nearest to ``want`` for a box of ``w`` x ``h``: ``want`` itself
 * when free, else the closest grid point (rings of growing distance, rightward and
 * downward first on ties). ``ignore`` holds node ids left out of the check.
 * @returns {{x: number, y: number}}
 */
export function freeSpot(model, want, { w = NODE_WIDTH, h = 56, ignore = new Set() } = {}) {
  const boxes = model.nodes.filter((n) => !ignore.has(n.id)).map((n) => nodeBox(model, n));
  const at = (x, y) => ({ x, y, w, h });
  if (!blocked(boxes, at(want.x, want.y))) return { x: want.x, y: want.y };
  for (let ring = 1; ring <= MAX_RINGS; ring++) {
    const found = [];
    for (let i = -ring; i <= ring; i++) {
      for (const [dx, dy] of [[i, ring], [i, -ring], [ring, i], [-ring, i]]) {
        const x = want.x + dx * GRID;
        const y = want.y + dy * GRID;
        if (!blocked(boxes, at(x, y))) found.push({ x, y, d: Math.hypot(dx, dy), dx, dy });
      }
    }
    if (found.length) {
      // nearest; ties go down (below a busy row), then right (further along the flow)
      found.sort((a, b) => a.d - b.d || b.dy - a.dy || b.dx - a.dx);
      return { x: found[0].x, y: found[0].y };
    }
  }
  // A very crowded area: below everything.
  const bottom = Math.max(...boxes.map((b) => b.y + b.h));
  return { x: want.x, y: bottom + GAP * 2 };
}

/**
 * Where a node of ``type`` added after ``source``'s output ``port`` goes: one column to
 * the right, level with the port, or the nearest free place from there.
 */
export function spotAfter(model, source, port, type) {
  const h = model.nodeHeight({ id: "", type, config: {} });
  const p = model.portOffset(source, "out", port);
  const want = { x: source.position.x + COLUMN, y: Math.round(source.position.y + p.y - h / 2) };
  return freeSpot(model, want, { h });
}

/**
 * A shift (dx, dy) that puts fragment nodes (positions as they are in the fragment) with
 * their box's top-left corner at ``at`` and clear of every node of the model; heights by
 * ``heightOf(node)``.
 */
export function freeOffset(model, nodes, at, heightOf) {
  if (!nodes.length) return { dx: 0, dy: 0 };
  const left = Math.min(...nodes.map((n) => Number(n.position?.x) || 0));
  const top = Math.min(...nodes.map((n) => Number(n.position?.y) || 0));
  const boxes = model.nodes.map((n) => nodeBox(model, n));
  const clear = (dx, dy) => nodes.every((n) => !blocked(boxes, {
    x: (Number(n.position?.x) || 0) + dx, y: (Number(n.position?.y) || 0) + dy, w: NODE_WIDTH, h: heightOf(n),
  }));
  const dx0 = at.x - left;
  const dy0 = at.y - top;
  for (let step = 0; step <= MAX_RINGS * 4; step++) {
    // straight down first (a pasted copy lands under what is there), then right
    for (const [dx, dy] of step ? [[0, step], [step, 0], [step, step]] : [[0, 0]]) {
      if (clear(dx0 + dx * GRID, dy0 + dy * GRID)) return { dx: dx0 + dx * GRID, dy: dy0 + dy * GRID };
    }
  }
  const bottom = Math.max(...boxes.map((b) => b.y + b.h));
  return { dx: dx0, dy: bottom + GAP * 2 - top };
}

/**
 * Make room for a node put into ``edge`` (source -> target): the new node's place one
 * column right of the source, level with it, and the moves [{id, x, y}] that shift the
 * target and everything downstream of it (not upstream of the source) right by one
 * column when the target is closer than two columns to the source.
 */
export function roomOnEdge(model, edge, type) {
  const source = model.node(edge.source);
  const target = model.node(edge.target);
  const h = model.nodeHeight({ id: "", type, config: {} });
  const p = model.portOffset(source, "out", edge.source_port);
  const at = { x: source.position.x + COLUMN, y: Math.round(source.position.y + p.y - h / 2) };
  const moves = [];
  const need = at.x + COLUMN - target.position.x;
  if (need > 0) {
    const upstream = reachable(model, source.id, "up");
    const downstream = reachable(model, target.id, "down");
    for (const id of downstream) {
      if (upstream.has(id)) continue; // a loop back: leave the source side where it is
      const n = model.node(id);
      moves.push({ id, x: n.position.x + need, y: n.position.y });
    }
  }
  return { at, moves };
}

/** Node ids reachable from ``start`` following edges ``down`` (to targets) or ``up``. */
function reachable(model, start, direction) {
  const seen = new Set([start]);
  const todo = [start];
  while (todo.length) {
    const id = todo.pop();
    for (const e of model.edges) {
      const [from, to] = direction === "down" ? [e.source, e.target] : [e.target, e.source];
      if (from === id && !seen.has(to)) {
        seen.add(to);
        todo.push(to);
      }
    }
  }
  return seen;
}
