// Auto-layout: a layered ("Sugiyama-style") drawing, left to right.
//
// Steps, after K. Sugiyama, S. Tagawa, M. Toda, "Methods for Visual Understanding of
// Hierarchical System Structures", IEEE Trans. SMC 11(2), 1981, and P. Healy, N. Nikolov,
// "Hierarchical Drawing Algorithms", ch. 13 of the Handbook of Graph Drawing and
// Visualization (R. Tamassia ed., CRC 2013):
//   1. cycle removal: edges closing a cycle in a depth-first search are reversed (drafts
//      may hold cycles the compiler rejects; the layout must still terminate);
//   2. layering by longest path: layer(v) = 1 + max layer of its predecessors, sources in
//      layer 0 (Healy & Nikolov §13.3.1), so every edge points to a later layer;
//   3. edges spanning several layers get a dummy vertex per crossed layer;
//   4. crossing reduction by the barycenter heuristic (Sugiyama et al. §3): layer by layer,
//      down then up, each vertex is ordered by the mean position of its neighbours in the
//      previous layer; SWEEPS sweeps, keeping the order with the fewest crossings;
//   5. coordinates: layer i at x = i * (width + GAP_X); in each layer vertices are stacked
//      in order, then pulled towards the mean y of their neighbours (a few passes) while
//      keeping order and spacing; the caller places the drawing where the old one began.
// Sticky notes and the viewport are left as they are. O(SWEEPS * (V + E) log V).

const GAP_X = 96;
const GAP_Y = 40;
const DUMMY_HEIGHT = 8;
const SWEEPS = 12;
const PULL_PASSES = 8;

/**
 * @param {{id: string}[]} nodes    nodes to place (notes excluded by the caller)
 * @param {{source: string, target: string}[]} edges
 * @param {(id: string) => number} heightOf  node height in canvas units
 * @param {number} width  node width in canvas units
 * @returns {Map<string, {x: number, y: number}>} top-left corner of every node, relative to (0, 0)
 */
export function layeredLayout(nodes, edges, heightOf, width) {
  const ids = nodes.map((n) => n.id);
  const known = new Set(ids);
  const links = dedupe(edges.filter((e) => known.has(e.source) && known.has(e.target) && e.source !== e.target));
  const acyclic = removeCycles(ids, links);
  const layer = longestPathLayers(ids, acyclic);
  const { layers, succ, pred, height } = withDummies(ids, acyclic, layer, heightOf);
  orderLayers(layers, succ, pred);
  return coordinates(layers, succ, pred, height, width, known);
}

function dedupe(edges) {
  const seen = new Set();
  const out = [];
  for (const e of edges) {
    const k = `${e.source}\u0000${e.target}`;
    if (!seen.has(k)) {
      seen.add(k);
      out.push({ source: e.source, target: e.target });
    }
  }
  return out;
}

/** Reverse the back edges of an iterative depth-first search (step 1). */
function removeCycles(ids, edges) {
  const out = new Map(ids.map((id) => [id, []]));
  edges.forEach((e, i) => out.get(e.source).push(i));
  const state = new Map(); // 1 = on stack, 2 = done
  const reversed = new Set();
  for (const root of ids) {
    if (state.has(root)) continue;
    const stack = [[root, 0]];
    state.set(root, 1);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const list = out.get(top[0]);
      if (top[1] >= list.length) {
        state.set(top[0], 2);
        stack.pop();
        continue;
      }
      const i = list[top[1]++];
      const t = edges[i].target;
      if (state.get(t) === 1) reversed.add(i);
      else if (!state.has(t)) {
        state.set(t, 1);
        stack.push([t, 0]);
      }
    }
  }
  return edges.map((e, i) => (reversed.has(i) ? { source: e.target, target: e.source } : e));
}

/** Longest-path layering in topological order (Kahn), step 2. */
function longestPathLayers(ids, edges) {
  const indeg = new Map(ids.map((id) => [id, 0]));
  const out = new Map(ids.map((id) => [id, []]));
  for (const e of edges) {
    out.get(e.source).push(e.target);
    indeg.set(e.target, indeg.get(e.target) + 1);
  }
  const layer = new Map(ids.map((id) => [id, 0]));
  const queue = ids.filter((id) => indeg.get(id) === 0);
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q];
    for (const w of out.get(v)) {
      layer.set(w, Math.max(layer.get(w), layer.get(v) + 1));
      indeg.set(w, indeg.get(w) - 1);
      if (indeg.get(w) === 0) queue.push(w);
    }
  }
  return layer;
}

/** Split long edges with dummy vertices (step 3); layers hold vertex ids in order. */
function withDummies(ids, edges, layer, heightOf) {
  const succ = new Map(ids.map((id) => [id, []]));
  const pred = new Map(ids.map((id) => [id, []]));
  const height = new Map(ids.map((id) => [id, heightOf(id)]));
  let dummies = 0;
  for (const e of edges) {
    let prev = e.source;
    for (let l = layer.get(e.source) + 1; l < layer.get(e.target); l++) {
      const d = `\u0000dummy${dummies++}`;
      layer.set(d, l);
      succ.set(d, []);
      pred.set(d, []);
      height.set(d, DUMMY_HEIGHT);
      succ.get(prev).push(d);
      pred.get(d).push(prev);
      prev = d;
    }
    succ.get(prev).push(e.target);
    pred.get(e.target).push(prev);
  }
  const layers = [];
  // Initial order: the nodes' order in the diagram (stable, predictable for people).
  for (const [v, l] of layer) {
    while (layers.length <= l) layers.push([]);
    layers[l].push(v);
  }
  return { layers, succ, pred, height };
}

/** Barycenter sweeps (step 4): keeps the best ordering found. */
function orderLayers(layers, succ, pred) {
  let best = layers.map((l) => [...l]);
  let bestCrossings = totalCrossings(layers, succ);
  for (let sweep = 0; sweep < SWEEPS && bestCrossings > 0; sweep++) {
    const down = sweep % 2 === 0;
    if (down) for (let i = 1; i < layers.length; i++) sortByBarycenter(layers[i], layers[i - 1], pred);
    else for (let i = layers.length - 2; i >= 0; i--) sortByBarycenter(layers[i], layers[i + 1], succ);
    const c = totalCrossings(layers, succ);
    if (c < bestCrossings) {
      bestCrossings = c;
      best = layers.map((l) => [...l]);
    }
  }
  best.forEach((l, i) => (layers[i] = l));
}

function sortByBarycenter(layer, fixed, neighbours) {
  const pos = new Map(fixed.map((v, i) => [v, i]));
  const key = new Map();
  layer.forEach((v, i) => {
    const ns = neighbours.get(v).filter((n) => pos.has(n));
    // Vertices without neighbours keep their place.
    key.set(v, ns.length ? ns.reduce((s, n) => s + pos.get(n), 0) / ns.length : i);
  });
  layer.sort((a, b) => key.get(a) - key.get(b));
}

/** Crossings between consecutive layers (pairs of edges with inverted ends). */
function totalCrossings(layers, succ) {
  let total = 0;
  for (let i = 0; i + 1 < layers.length; i++) {
    const pos = new Map(layers[i + 1].map((v, j) => [v, j]));
    const ends = [];
    layers[i].forEach((v, a) => {
      for (const w of succ.get(v)) if (pos.has(w)) ends.push([a, pos.get(w)]);
    });
    ends.sort((p, q) => p[0] - q[0] || p[1] - q[1]);
    total += inversions(ends.map((p) => p[1]));
  }
  return total;
}

/** Number of inversions of a list, by merge sort: O(n log n). */
function inversions(list) {
  if (list.length < 2) return 0;
  const mid = list.length >> 1;
  const left = list.slice(0, mid);
  const right = list.slice(mid);
  let count = inversions(left) + inversions(right);
  let i = 0, j = 0, k = 0;
  while (i < left.length && j < right.length) {
    if (left[i] <= right[j]) list[k++] = left[i++];
    else {
      list[k++] = right[j++];
      count += left.length - i;
    }
  }
  while (i < left.length) list[k++] = left[i++];
  while (j < right.length) list[k++] = right[j++];
  return count;
}

/** Step 5: x by layer; y stacked, then pulled towards neighbours while keeping order. */
function coordinates(layers, succ, pred, height, width, real) {
  const y = new Map();
  for (const layer of layers) {
    let top = 0;
    for (const v of layer) {
      y.set(v, top);
      top += height.get(v) + GAP_Y;
    }
  }
  const centre = (v) => y.get(v) + height.get(v) / 2;
  for (let pass = 0; pass < PULL_PASSES; pass++) {
    const order = pass % 2 === 0 ? layers : [...layers].reverse();
    for (const layer of order) {
      // Wanted centres: the mean centre of all neighbours.
      const want = layer.map((v) => {
        const ns = [...pred.get(v), ...succ.get(v)];
        return ns.length ? ns.reduce((s, n) => s + centre(n), 0) / ns.length - height.get(v) / 2 : y.get(v);
      });
      // Place in order, each as close to its wish as the one above allows ...
      let floor = -Infinity;
      layer.forEach((v, i) => {
        const at = Math.max(want[i], floor);
        y.set(v, at);
        floor = at + height.get(v) + GAP_Y;
      });
      // ... then shift the layer so that it is pushed down no more than it is pulled up.
      const shift = layer.reduce((sum, v, i) => sum + want[i] - y.get(v), 0) / (layer.length || 1);
      for (const v of layer) y.set(v, y.get(v) + shift);
    }
  }
  let minY = Infinity;
  for (const [v, value] of y) if (real.has(v)) minY = Math.min(minY, value);
  const out = new Map();
  layers.forEach((layer, i) => {
    for (const v of layer) {
      if (real.has(v)) out.set(v, { x: i * (width + GAP_X), y: Math.round(y.get(v) - minY) });
    }
  });
  return out;
}
