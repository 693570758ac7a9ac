// A run drawn over a diagram: each node's status, attempts and duration, kept live over
// Server-Sent Events (GET /runs/{id}/events, event "update", data = the run detail JSON,
// the stream the run page uses). Used by the designer's test runs and the run page.

import { edgeStates } from "./graph-view.js";

export const NOT_RUN = "not_run";
const ENDED = new Set(["succeeded", "failed", "cancelled", "timed_out"]);

/** True when a run status is final. */
export function runEnded(status) {
  return ENDED.has(status);
}

/** "840 ms", "1.4 s", "2 min 5 s"; "" when unknown. */
export function formatDuration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.floor((ms % 60000) / 1000)} s`;
}

/** The note under a node: "2 attempts · 1.4 s" (attempts only when more than one). */
export function stepNote(step) {
  const parts = [];
  const n = (step.attempts || []).length;
  if (n > 1) parts.push(`${n} attempts`);
  const d = formatDuration(step.duration_ms);
  if (d) parts.push(d);
  return parts.join(" · ");
}

/**
 * What the canvas shows for `run` over `diagram`: {statuses, edges, notes}. Nodes the run's
 * graph does not hold (a test of one step) are "not_run" once the run ended.
 */
export function overlayOf(diagram, run) {
  const statuses = {};
  const ports = {};
  const notes = {};
  for (const step of run.steps || []) {
    statuses[step.step_id] = step.status;
    ports[step.step_id] = step.ports || [];
    const note = stepNote(step);
    if (note) notes[step.step_id] = note;
  }
  for (const node of diagram.nodes || []) {
    if (node.type === "ui.note" || node.id in statuses) continue;
    statuses[node.id] = runEnded(run.status) ? NOT_RUN : "pending";
  }
  return { statuses, edges: edgeStates(diagram, statuses, ports), notes };
}

/**
 * Follow run `runId`: `onUpdate(run)` with the run JSON on every change (the first comes at
 * once), until the run ends or `stop()` is called. Returns {stop}.
 */
export function followRun(runId, onUpdate, { onStale = () => {} } = {}) {
  const source = new EventSource(`/runs/${encodeURIComponent(runId)}/events`);
  let stopped = false;
  source.addEventListener("update", (e) => {
    let run;
    try {
      run = JSON.parse(e.data);
    } catch {
      return;
    }
    if (stopped) return;
    onUpdate(run);
    if (runEnded(run.status)) {
      stopped = true;
      source.close();
    }
  });
  source.addEventListener("error", () => onStale(source.readyState !== EventSource.OPEN));
  source.addEventListener("open", () => onStale(false));
  return {
    stop() {
      stopped = true;
      source.close();
    },
  };
}

/**
 * A JSON value as a <pre>, with a download link under it for each large part (previews
 * of values stored by reference carry "$railyard.payload" and a download_url).
 */
export function valueBlock(value, className = "") {
  const wrap = document.createElement("div");
  wrap.className = `value-block ${className}`.trim();
  const pre = document.createElement("pre");
  pre.className = "json mono small";
  pre.textContent = value === undefined || value === null ? "null" : JSON.stringify(value, null, 2);
  wrap.appendChild(pre);
  for (const large of largeParts(value, "$")) {
    const a = document.createElement("a");
    a.className = "download-link small";
    a.href = large.url;
    a.setAttribute("download", "");
    a.textContent = `Download ${large.path} (${large.summary || "large value"})`;
    wrap.appendChild(a);
  }
  return wrap;
}

function largeParts(value, path, found = []) {
  if (Array.isArray(value)) {
    value.forEach((v, i) => largeParts(v, `${path}[${i}]`, found));
  } else if (value && typeof value === "object") {
    if (typeof value["$railyard.payload"] === "string" && typeof value.download_url === "string") {
      found.push({ path, url: value.download_url, summary: value.summary });
    } else if (typeof value.ref === "string" && value.ref.startsWith("file:") && "filename" in value) {
      found.push({ path, url: `/api/v1/files/${value.ref.slice(5)}`, summary: `file ${value.filename}` });
    } else {
      for (const [k, v] of Object.entries(value)) largeParts(v, `${path}.${k}`, found);
    }
  }
  return found;
}
