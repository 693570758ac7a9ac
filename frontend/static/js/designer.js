// Entry point of the designer page (templates/designer.html).
// Wires the model, canvas, palette, config panel, diagnostics and toolbar together; edit
// commands, undo/redo and shortcuts are wired in designer-edit.js.

import { errorMessage, postJSON } from "./api.js";
import { DraftSaver } from "./autosave.js";
import { Canvas, LOD_ZOOM } from "./canvas.js";
import { attachCopyButton } from "./clipboard.js";
import { attachCodeEditors } from "./code-editor.js";
import { wireEditing } from "./designer-edit.js";
import { attachChildContract } from "./child-contract.js";
import { attachConditionBuilder } from "./condition-targets.js";
import { StepDataView } from "./data-view.js";
import { DiagnosticsList, problems } from "./diagnostics.js";
import { attachExpressionEditor } from "./expression-editor.js";
import { attachFieldDrag } from "./field-drag.js";
import { DiagramModel, NODE_WIDTH } from "./model.js";
import { acceptDrops, renderPalette } from "./palette.js";
import { ConfigPanel } from "./panel.js";
import { freeSpot } from "./placement.js";
import { askPublishNote } from "./publish-note.js";
import { QuickAdd } from "./quickadd.js";
import { TestRuns } from "./test-runs.js";
import { attachTriggerPanels } from "./trigger-panels.js";
import { mountSettings } from "./workflow-settings.js";

const COMPILE_DELAY_MS = 400;

const root = document.getElementById("designer");
const workflowId = root.dataset.workflowId;
const catalog = parseJSON(root.dataset.catalog, []);
const connectors = parseJSON(root.dataset.connectors, []);
const model = new DiagramModel(parseJSON(root.dataset.diagram, {}), catalog);
// Decided by the server's policy (workflow:edit, not archived): a user who may not edit
// gets no palette, no dragging, no edit keys and read-only settings (designer.html).
const readOnly = Boolean(root.dataset.readOnly);

const statusEl = document.getElementById("status");
let dirty = false;
let diagnostics = [];
let compileTimer = null;
let compileSeq = 0;
let testRuns = null; // set below, once the toolbar is wired
let dataView = null; // the step data view (data-view.js), set with testRuns

function parseJSON(text, fallback) {
  if (!text) return fallback;
  try {
    return JSON.parse(text);
  } catch (err) {
    console.error("Bad JSON in page data", err);
    return fallback;
  }
}

// Counts status changes. The background check (compile) refreshes the "Unsaved changes"
// line only while that line is still what the user sees: feedback given since (e.g.
// "Cannot connect a to b" after pressing C) stays until the user's next action.
let statusStamp = 0;
let draftStatusStamp = -1;
function showDraftStatus() {
  setStatus(diagnostics.length ? `Unsaved changes · ${problems(diagnostics.length)}` : "Unsaved changes", "dirty");
  draftStatusStamp = statusStamp;
}

/** kind: "ok" | "error" | "busy" | "dirty" | "" */
function setStatus(text, kind = "") {
  statusStamp += 1;
  statusEl.textContent = text;
  statusEl.dataset.kind = kind;
  statusEl.title = text;
}

// ------------------------------------------------------------------ components

const panel = new ConfigPanel(document.getElementById("config-panel"), model, {
  workflowId,
  readOnly,
  onStatus: (m, k) => setStatus(m, k),
  // "New credential" leaves the page: keep the drawing first.
  beforeLeave: async () => readOnly || !dirty || (await save()),
});
attachTriggerPanels(document.getElementById("config-panel"), model, workflowId, {
  save: () => save(),
  onPinned: () => testRuns?.loadPins(),
  canEdit: !readOnly,
});
attachExpressionEditor(document.getElementById("config-panel"), model, workflowId);
attachConditionBuilder(document.getElementById("config-panel"), model, workflowId);
attachChildContract(document.getElementById("config-panel"), model, workflowId);
attachFieldDrag(document.getElementById("config-panel"), model, workflowId);
attachCodeEditors(document.getElementById("config-panel"));

const quickAdd = new QuickAdd(document.querySelector(".canvas-wrap"), catalog);
const canvas = new Canvas(document.getElementById("canvas"), model, {
  locked: readOnly,
  onSelect(sel) {
    if (sel && sel.kind === "node") panel.open(sel.id);
    else panel.close();
    testRuns?.select(sel && sel.kind === "node" ? sel.id : null);
    dataView?.select(sel && sel.kind === "node" ? sel.id : null);
  },
  onQuickAdd(source, port, clientX, clientY, dropped) {
    const at = dropped ? canvas.screenToCanvas(clientX, clientY) : null;
    quickAdd.open(clientX, clientY, (type) => editor.addAfter(source, port, type, at));
  },
});

const diagnosticsList = new DiagnosticsList(document.getElementById("diagnostics"), {
  onFocus(nodeId) {
    if (!model.node(nodeId)) return;
    canvas.centerOn(nodeId);
    canvas.select({ kind: "node", id: nodeId });
  },
});

function addNode(type, clientX, clientY) {
  if (clientX !== null && clientX !== undefined) {
    // Dropped on an edge: insert the node into it.
    const hit = document.elementFromPoint(clientX, clientY);
    const edgeId = hit && hit.dataset ? hit.dataset.edgeId : null;
    if (edgeId && model.edge(edgeId)) {
      editor.insertOnEdge(edgeId, type, canvas.screenToCanvas(clientX, clientY));
      return;
    }
  }
  // Click / keyboard: the middle of the view; dropped: under the pointer. Either way the
  // nearest place where it covers no other node (placement.js).
  const dropped = clientX !== null && clientX !== undefined;
  const p = dropped ? canvas.screenToCanvas(clientX, clientY) : canvas.visibleCenter();
  const h = model.nodeHeight({ id: "", type, config: {} });
  const want = { x: canvas.snapped(p.x - NODE_WIDTH / 2), y: canvas.snapped(p.y - h / 2) };
  const pos = freeSpot(model, want, { h });
  const node = model.addNode(type, pos.x, pos.y);
  canvas.select({ kind: "node", id: node.id });
}

if (!readOnly) {
  renderPalette(document.getElementById("palette-list"), document.getElementById("palette-search"), catalog, { onAdd: addNode, connectors });
  acceptDrops(canvas.svg, addNode);
}

// ------------------------------------------------------------------ changes & diagnostics

const emptyHint = document.getElementById("canvas-empty");
function updateEmptyHint() {
  emptyHint.hidden = model.nodes.length > 0;
}

model.onChange((kind) => {
  updateEmptyHint();
  if (kind !== "graph") return; // pan/zoom is saved but does not make the draft dirty
  if (readOnly) return; // nothing can change it here, nothing is saved
  dirty = true;
  saver.changed();
  showDraftStatus();
  clearTimeout(compileTimer);
  compileTimer = setTimeout(compile, COMPILE_DELAY_MS);
});

function showDiagnostics(list) {
  diagnostics = Array.isArray(list) ? list : [];
  canvas.setDiagnostics(diagnostics);
  diagnosticsList.show(diagnostics);
  panel.showDiagnostics(diagnostics);
}

async function compile() {
  const seq = ++compileSeq;
  let resp;
  try {
    resp = await postJSON(`/api/v1/workflows/${workflowId}/compile`, { diagram: model.toJSON() });
  } catch (err) {
    if (seq === compileSeq) setStatus(`Check failed: ${err.message}`, "error");
    return;
  }
  if (seq !== compileSeq) return; // a newer compile is on its way
  if (!resp.ok && resp.status !== 422) {
    setStatus(`Check failed: ${errorMessage(resp)}`, "error");
    return;
  }
  showDiagnostics(resp.data?.diagnostics);
  if (dirty && statusStamp === draftStatusStamp) showDraftStatus();
}

// ------------------------------------------------------------------ toolbar

const saveBtn = document.getElementById("save-btn");
const publishBtn = document.getElementById("publish-btn");

const saver = new DraftSaver(workflowId, Number(root.dataset.draftRevision) || 0, {
  diagram: () => model.toJSON(),
  onStatus: setStatus,
  onSaved(data) {
    dirty = saver.dirty;
    showDiagnostics(data.diagnostics);
    const n = diagnostics.length;
    const errors = diagnostics.filter((d) => d.severity !== "warning").length;
    setStatus(n ? `Saved · ${problems(n)}` : "Saved", errors ? "error" : "ok");
  },
});

/** Save the draft; resolves to true on success. */
async function save() {
  clearTimeout(compileTimer);
  compileSeq++; // a save answers with fresh diagnostics; ignore compiles in flight
  return saver.save();
}

async function publish() {
  // A draft with errors cannot be published: say so before asking for a note.
  clearTimeout(compileTimer);
  await compile();
  const errors = diagnostics.filter((d) => d.severity !== "warning").length;
  if (errors) {
    setStatus(`${problems(errors)} to fix first · not published (see Problems)`, "error");
    return;
  }
  const versionNote = await askPublishNote();
  if (versionNote === null) return;
  if (!(await save())) return;
  setStatus("Publishing…", "busy");
  let resp;
  try {
    resp = await postJSON(`/api/v1/workflows/${workflowId}/publish`, { note: versionNote });
  } catch (err) {
    setStatus(`Publish failed: ${err.message}`, "error");
    return;
  }
  if (resp.status === 422 && resp.data?.diagnostics) {
    showDiagnostics(resp.data.diagnostics);
    setStatus(`${problems(diagnostics.length)} · not published`, "error");
    return;
  }
  if (!resp.ok) {
    setStatus(`Publish failed: ${errorMessage(resp)}`, "error");
    return;
  }
  const version = resp.data?.version || {};
  const badge = document.getElementById("version-badge");
  badge.textContent = `v${version.version}`;
  badge.title = `Version ${version.version}, published by ${version.publisher || "a removed account"}` +
    (version.active ? "; webhooks and schedules run it" : "; not active");
  badge.hidden = false;
  root.dataset.activeVersion = version.version;
  showWebhook(resp.data?.webhook_url);
  showTriggerLink();
  const note = resp.data?.created === false ? " (no changes since the last publish)" : "";
  const warnings = resp.data?.warnings || [];
  showDiagnostics(warnings); // what runs will ignore stays listed under Problems
  const warned = warnings.length ? ` · ${warnings.length} warning${warnings.length === 1 ? "" : "s"}` : "";
  setStatus(`Published version ${version.version}${note}${warned}`, "ok");
}

/** After a publish: the toolbar's trigger badge is fetched again (htmx reloads
 * #trigger-status-box from this page on "trigger-published"), so it shows the published
 * connector trigger's real state (Trigger: ok / pending / failing), or nothing for a
 * built-in trigger. */
function showTriggerLink() {
  document.body.dispatchEvent(new CustomEvent("trigger-published"));
}

/**
 * The toolbar's webhook box after a publish: the URL (with the trigger's path suffix) and
 * methods of the just-published webhook trigger; hidden when the trigger is no webhook.
 * On page load the server renders it from the active version (frontend/webhook_view.py).
 */
function showWebhook(baseUrl) {
  const box = document.getElementById("webhook-url");
  const trigger = model.nodes.find((n) => n.type === "trigger.webhook");
  if (!baseUrl || !trigger) {
    box.hidden = true;
    return;
  }
  const config = trigger.config || {};
  const suffix = String(config.path_suffix || "").replace(/^\/+|\/+$/g, "");
  const methods = String(config.methods || "POST").split(",").map((m) => m.trim().toUpperCase()).filter(Boolean);
  document.getElementById("webhook-url-text").textContent = suffix ? `${baseUrl}/${suffix}` : baseUrl;
  document.getElementById("webhook-methods").replaceChildren(
    ...(methods.length ? methods : ["POST"]).map((m) => Object.assign(document.createElement("span"), { className: "badge badge-method", textContent: m })),
  );
  document.getElementById("webhook-disabled").hidden = config.enabled !== false;
  box.hidden = false;
}

attachCopyButton(
  document.getElementById("webhook-copy"),
  document.getElementById("webhook-url-text"),
  document.getElementById("webhook-copied"),
);

async function withBusy(button, fn) {
  button.disabled = true;
  try {
    await fn();
  } finally {
    button.disabled = false;
  }
}

// Save, Publish and Settings are rendered only for users who may edit the workflow.
saveBtn?.addEventListener("click", () => withBusy(saveBtn, save));
publishBtn?.addEventListener("click", () => withBusy(publishBtn, publish));
const settingsBtn = document.getElementById("settings-btn");
if (settingsBtn) mountSettings(workflowId, settingsBtn, setStatus);

// Run dialog ----------------------------------------------------------------

const runDialog = document.getElementById("run-dialog");
const runInput = document.getElementById("run-input");
const runError = document.getElementById("run-error");
const runResult = document.getElementById("run-result");
const runSubmit = document.getElementById("run-submit");

// Run is rendered only for users who may run the workflow.
document.getElementById("run-btn")?.addEventListener("click", () => {
  runError.hidden = true;
  runResult.hidden = true;
  if (dirty || !root.dataset.activeVersion) {
    runError.textContent = root.dataset.activeVersion
      ? "You have unpublished changes: the run uses the published version."
      : "Publish the workflow first: runs use the published version.";
    runError.hidden = false;
  }
  runDialog.showModal();
  runInput.focus();
});
document.getElementById("run-cancel").addEventListener("click", () => runDialog.close());

runSubmit.addEventListener("click", () => withBusy(runSubmit, async () => {
  runError.hidden = true;
  runResult.hidden = true;
  let input;
  try {
    input = runInput.value.trim() ? JSON.parse(runInput.value) : {};
  } catch (err) {
    runError.textContent = `Invalid JSON: ${err.message}`;
    runError.hidden = false;
    return;
  }
  let resp;
  try {
    resp = await postJSON(`/api/v1/workflows/${workflowId}/runs`, { input });
  } catch (err) {
    resp = { ok: false, status: 0, data: { detail: err.message } };
  }
  if (!resp.ok) {
    runError.textContent = errorMessage(resp);
    runError.hidden = false;
    setStatus(`Run failed to start: ${errorMessage(resp)}`, "error");
    return;
  }
  const link = document.getElementById("run-link");
  link.href = resp.data.url || `/runs/${resp.data.id}`;
  link.textContent = `open run ${resp.data.id}`;
  runResult.hidden = false;
  setStatus("Run started", "ok");
}));

// Canvas controls --------------------------------------------------------------

document.getElementById("zoom-in").addEventListener("click", () => canvas.zoomAt(1.2));
document.getElementById("zoom-out").addEventListener("click", () => canvas.zoomAt(1 / 1.2));
document.getElementById("zoom-fit").addEventListener("click", () => canvas.fitReadable());

// ------------------------------------------------------------------ editing

const editor = wireEditing({
  readOnly,
  model,
  canvas,
  panel,
  setStatus,
  save: () => (saveBtn ? withBusy(saveBtn, save) : Promise.resolve(false)),
  quickAdd,
});

// Pinned data, test step, test workflow, the run overlay (test-runs.js).
const testSection = document.getElementById("test-data");
testRuns = new TestRuns({
  workflowId,
  model,
  canvas,
  save: () => (saveBtn ? save() : Promise.resolve(true)),
  setStatus,
  canEdit: Boolean(testSection.dataset.canEdit),
  canRun: Boolean(testSection.dataset.canRun),
  section: testSection,
  overlayBar: document.getElementById("run-overlay"),
  testButton: document.getElementById("test-btn"),
});

// The step data view: input, settings and output side by side (data-view.js).
dataView = new StepDataView({
  root,
  bar: document.getElementById("data-view-bar"),
  input: document.getElementById("data-input"),
  output: document.getElementById("data-output"),
  canvasEl: document.getElementById("canvas"),
  model,
  testRuns,
  workflowId,
  canEdit: Boolean(testSection.dataset.canEdit),
});

window.addEventListener("beforeunload", (e) => {
  if (saver.dirty && saveBtn) {
    e.preventDefault();
    e.returnValue = "";
  }
});

// ------------------------------------------------------------------ start

/** Back from /credentials (?node=&field=&credential=): fill in the new credential. */
function applyReturnFromCredentials() {
  const params = new URLSearchParams(location.search);
  const nodeId = params.get("node");
  if (!nodeId) return;
  history.replaceState(null, "", location.pathname);
  const node = model.node(nodeId);
  if (!node) return;
  const field = params.get("field");
  const credential = params.get("credential");
  if (field && credential && !node.config[field]) {
    model.updateNode(node.id, { config: { ...node.config, [field]: credential } });
  }
  canvas.select({ kind: "node", id: node.id });
}

updateEmptyHint();
// The first open fits the graph; so does a viewport remembered below the zoom where labels
// are drawn (a viewer would see blank boxes).
if (model.nodes.length && (!root.dataset.diagram.includes('"viewport"') || model.viewport.zoom < LOD_ZOOM)) canvas.fitReadable();
applyReturnFromCredentials();
if (model.nodes.length) compile(); // show the draft's diagnostics right away
window.railyardDesigner = { model, canvas, panel, editor, saver, history: editor.history, testRuns, dataView, setStatus }; // for designer-versions.js, debugging and e2e tests
