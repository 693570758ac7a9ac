// Run detail page: the diagram coloured by step status, kept live over Server-Sent Events
// (GET /runs/{id}/events, event "update", data = the run as JSON). When the run reaches a
// terminal status the page reloads once to show final outputs.

import { errorMessage, request } from "./api.js";
import { edgeStates, renderGraph } from "./graph-view.js";
import { NOT_RUN, stepNote } from "./run-overlay.js";

const view = document.getElementById("run-view");
// Run statuses, from the server's one list (backend/engine/states.py, RUN_STATUSES):
// [{value, label, terminal, actions: ["pause" | "resume" | "cancel" | "rerun_..."]}].
const RUN_STATUSES = new Map((parseJSON(view.dataset.runStatuses) || []).map((s) => [s.value, s]));
const TERMINAL = new Set([...RUN_STATUSES.values()].filter((s) => s.terminal).map((s) => s.value));
const initialStatus = view.dataset.status;
const diagram = parseJSON(view.dataset.diagram) || { nodes: [], edges: [] };
const catalog = parseJSON(view.dataset.catalog) || [];
const typeLabels = new Map(catalog.map((spec) => [spec.type, spec.label]));

function parseJSON(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

function statusesFromDom() {
  const map = {};
  for (const s of document.querySelectorAll("section.step[data-step-id]")) map[s.dataset.stepId] = s.dataset.status;
  return map;
}

function portsFromDom() {
  const map = {};
  for (const s of document.querySelectorAll("section.step[data-step-id]")) {
    map[s.dataset.stepId] = (s.dataset.ports || "").split(" ").filter(Boolean);
  }
  return map;
}

const canvas = renderGraph(document.getElementById("run-graph"), diagram, {
  catalog,
  statuses: statusesFromDom(),
  ports: portsFromDom(),
  onNodeClick(nodeId) {
    const section = document.querySelector(`section.step[data-step-id="${CSS.escape(nodeId)}"]`);
    if (!section) return;
    section.scrollIntoView({ behavior: "smooth", block: "center" });
    section.classList.remove("flash");
    void section.offsetWidth; // restart the animation
    section.classList.add("flash");
  },
});

// Graph view: zoom buttons (the wheel zooms and dragging pans too); the card is resizable
// (drag its lower edge), and the view fits again when it is resized.
const MIN_READABLE_ZOOM = 0.75;
document.getElementById("graph-zoom-in")?.addEventListener("click", () => canvas.zoomAt(1.25));
document.getElementById("graph-zoom-out")?.addEventListener("click", () => canvas.zoomAt(1 / 1.25));
document.getElementById("graph-actual")?.addEventListener("click", () => canvas.zoomAt(1 / canvas.model.viewport.zoom));
document.getElementById("graph-fit")?.addEventListener("click", () => canvas.fit());
// A large graph fitted into the card is too small to read: show it at a readable zoom
// instead, starting at the trigger (Fit still shows all of it).
function readableStart() {
  if (canvas.model.viewport.zoom >= MIN_READABLE_ZOOM) return;
  canvas.zoomAt(MIN_READABLE_ZOOM / canvas.model.viewport.zoom);
  const first = [...(diagram.nodes || [])].sort((a, b) => a.position.x - b.position.x)[0];
  if (first) {
    const r = canvas.svg.getBoundingClientRect();
    const vp = canvas.model.viewport;
    canvas.model.setViewport({ ...vp, x: 40 - first.position.x * vp.zoom, y: r.height / 2 - (first.position.y + 28) * vp.zoom });
  }
}
readableStart();
if (window.ResizeObserver) {
  let last = null;
  new ResizeObserver(([entry]) => {
    const height = Math.round(entry.contentRect.height);
    if (last !== null && height !== last) canvas.render();
    last = height;
  }).observe(document.getElementById("run-graph"));
}

// Attempts and duration under each node.
function notesOf(run) {
  const notes = {};
  for (const step of run?.steps || []) {
    const note = stepNote(step);
    if (note) notes[step.step_id] = note;
  }
  return notes;
}
let notes = notesOf(parseJSON(view.dataset.run));

// Nodes of the diagram that are not steps of the run's graph (a test of one step runs only
// that step and the ones before it): not run once the run ended.
function withUnreached(statuses, runStatus) {
  const all = { ...statuses };
  for (const node of diagram.nodes || []) {
    if (node.type !== "ui.note" && !(node.id in all)) all[node.id] = TERMINAL.has(runStatus) ? NOT_RUN : "pending";
  }
  return all;
}
const shown = withUnreached(statusesFromDom(), initialStatus);
canvas.setStatuses(shown, edgeStates(diagram, shown, portsFromDom()), notes);

// Replay from a step with its input edited: POST /api/v1/runs/{id}/replay {step_id, input},
// then open the new run.
for (const button of document.querySelectorAll("[data-replay-step]")) {
  button.addEventListener("click", async () => {
    const box = button.closest(".step-replay");
    const error = box.querySelector(".replay-error");
    error.hidden = true;
    let input;
    try {
      input = JSON.parse(box.querySelector(".replay-input").value);
    } catch (err) {
      error.textContent = `Invalid JSON: ${err.message}`;
      error.hidden = false;
      return;
    }
    button.disabled = true;
    try {
      const result = await request("POST", `/api/v1/runs/${view.dataset.runId}/replay`, { step_id: button.dataset.replayStep, input });
      if (result.ok && result.data) {
        window.location.assign(`/runs/${result.data.id}`);
        return;
      }
      error.textContent = errorMessage(result);
    } catch (err) {
      error.textContent = err.message;
    } finally {
      button.disabled = false;
    }
    error.hidden = false;
  });
}

// Run controls: POST /api/v1/runs/{id}/{pause|resume|cancel}; the buttons shown follow the
// actions the status allows.
function showControls(status) {
  const actions = RUN_STATUSES.get(status)?.actions || [];
  for (const button of document.querySelectorAll("[data-run-action]")) {
    button.hidden = !actions.includes(button.dataset.runAction);
  }
}

for (const button of document.querySelectorAll("[data-run-action]")) {
  button.addEventListener("click", async () => {
    const action = button.dataset.runAction;
    if (action === "cancel" && !window.confirm("Cancel this run? Running steps are asked to stop.")) return;
    button.disabled = true;
    try {
      const result = await request("POST", `/api/v1/runs/${view.dataset.runId}/${action}`);
      if (!result.ok) window.alert((result.data && result.data.detail) || `Could not ${action} the run.`);
    } catch (err) {
      window.alert(err.message);
    } finally {
      button.disabled = false;
    }
    if (!window.EventSource || TERMINAL.has(view.dataset.status)) window.location.reload();
  });
}

// Re-run: POST /api/v1/runs/{id}/rerun {"from": "failed_step" | "start"}, then open the new run.
for (const button of document.querySelectorAll("[data-rerun]")) {
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const result = await request("POST", `/api/v1/runs/${view.dataset.runId}/rerun`, { from: button.dataset.rerun });
      if (result.ok && result.data) window.location.assign(`/runs/${result.data.id}`);
      else window.alert((result.data && result.data.detail) || "Could not re-run.");
    } catch (err) {
      window.alert(err.message);
    } finally {
      button.disabled = false;
    }
  });
}

function setBadge(badge, status) {
  badge.dataset.status = status;
  badge.className = badge.className.replace(/\bstatus-\S+/g, "").trim() + ` status-${status}`;
  badge.textContent = String(status).replace(/_/g, " ");
}

function formatDuration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.floor((ms % 60000) / 1000)} s`;
}

function stepSection(step) {
  // A minimal section for a step that started after the page was rendered.
  const section = document.createElement("section");
  section.className = "step card";
  section.dataset.stepId = step.step_id;
  section.id = `step-${step.step_id}`;
  const header = document.createElement("header");
  header.className = "step-header";
  const badge = document.createElement("span");
  badge.className = "badge";
  const h3 = document.createElement("h3");
  h3.textContent = step.label || step.step_id;
  const type = document.createElement("span");
  type.className = "step-type muted small";
  type.title = step.type || "";
  type.textContent = typeLabels.get(step.type) || step.type || "";
  const dur = document.createElement("span");
  dur.className = "step-duration muted";
  header.append(badge, h3, type, dur);
  section.appendChild(header);
  document.getElementById("no-steps")?.remove();
  document.getElementById("steps").appendChild(section);
  return section;
}

const ports = portsFromDom();

function applyUpdate(run) {
  view.dataset.status = run.status;
  showControls(run.status);
  setBadge(document.getElementById("run-status"), run.status);
  const dur = document.getElementById("run-duration");
  if (dur && run.duration_ms !== undefined) dur.textContent = formatDuration(run.duration_ms);
  const statuses = {};
  for (const step of run.steps || []) {
    statuses[step.step_id] = step.status;
    ports[step.step_id] = step.ports || [];
    const section =
      document.querySelector(`section.step[data-step-id="${CSS.escape(step.step_id)}"]`) || stepSection(step);
    section.dataset.status = step.status;
    setBadge(section.querySelector(".badge"), step.status);
    section.querySelector(".step-duration").textContent = formatDuration(step.duration_ms);
  }
  const all = withUnreached({ ...statusesFromDom(), ...statuses }, run.status);
  notes = notesOf(run);
  canvas.setStatuses(all, edgeStates(diagram, all, ports), notes);
}

if (!TERMINAL.has(initialStatus) && window.EventSource) {
  const source = new EventSource(view.dataset.eventsUrl);
  source.addEventListener("update", (e) => {
    const run = parseJSON(e.data);
    if (!run) return;
    applyUpdate(run);
    if (TERMINAL.has(run.status)) {
      source.close();
      // Reload once for the final outputs; the reloaded page is terminal and does not subscribe.
      setTimeout(() => window.location.reload(), 300);
    }
  });
  source.addEventListener("error", () => {
    // EventSource reconnects by itself; show that the view may be stale meanwhile.
    view.classList.toggle("stale", source.readyState !== EventSource.OPEN);
  });
  source.addEventListener("open", () => view.classList.remove("stale"));
}
