// Workflow settings dialog (designer toolbar "Settings"): run-control settings of the
// workflow, saved with PATCH /api/v1/workflows/{id} {"settings": {...}} (null clears one).
//   error_workflow_id    workflow started with the failed run's context when a run fails
//   run_timeout_seconds  a run still going after this many seconds is timed out
//   max_concurrent_runs  further runs wait queued and start oldest first
// The server validates; its error (detail + field) is shown next to the form.

import { errorMessage, getAll, getJSON, request } from "./api.js";

function el(tag, attrs = {}, parent = null, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function buildDialog() {
  const dialog = el("dialog", { id: "settings-dialog", class: "dialog" }, document.body);
  const form = el("form", { method: "dialog", id: "settings-form" }, dialog);
  el("h2", {}, form, "Workflow settings");
  el("label", { for: "settings-error-workflow" }, form, "Error workflow");
  const errorWorkflow = el("select", { id: "settings-error-workflow", name: "error_workflow_id" }, form);
  el("p", { class: "muted small" }, form, "Started with the failed run's context when a run fails or times out.");
  el("label", { for: "settings-run-timeout" }, form, "Run timeout (seconds)");
  const timeout = el("input", { id: "settings-run-timeout", name: "run_timeout_seconds", type: "number", min: "1", step: "any", placeholder: "no timeout" }, form);
  el("label", { for: "settings-max-runs" }, form, "Max concurrent runs");
  const maxRuns = el("input", { id: "settings-max-runs", name: "max_concurrent_runs", type: "number", min: "1", step: "1", placeholder: "no limit" }, form);
  el("p", { class: "muted small" }, form, "Further runs wait (queued) and start in order when a run ends.");
  const error = el("p", { id: "settings-error", class: "field-error" }, form);
  error.hidden = true;
  const actions = el("div", { class: "dialog-actions" }, form);
  const cancel = el("button", { type: "button", class: "btn", id: "settings-cancel" }, actions, "Close");
  const save = el("button", { type: "button", class: "btn btn-primary", id: "settings-save" }, actions, "Save settings");
  return { dialog, errorWorkflow, timeout, maxRuns, error, cancel, save };
}

function numberOrNull(input) {
  const text = input.value.trim();
  return text === "" ? null : Number(text);
}

/**
 * Wire the Settings button of the designer toolbar.
 * @param {string} workflowId
 * @param {HTMLButtonElement} button
 * @param {(message: string, kind?: string) => void} setStatus  the toolbar status line
 */
export function mountSettings(workflowId, button, setStatus) {
  const ui = buildDialog();

  async function open() {
    ui.error.hidden = true;
    const [wf, all] = await Promise.all([getJSON(`/api/v1/workflows/${workflowId}`), getAll("/api/v1/workflows?limit=1000")]);
    if (!wf.ok || !all.ok) {
      setStatus(errorMessage(wf.ok ? all : wf), "error");
      return;
    }
    const settings = wf.data.settings || {};
    ui.errorWorkflow.replaceChildren();
    el("option", { value: "" }, ui.errorWorkflow, "None");
    for (const other of all.data) {
      if (other.id === workflowId) continue;
      const option = el("option", { value: other.id }, ui.errorWorkflow, other.name);
      if (other.id === settings.error_workflow_id) option.selected = true;
    }
    ui.timeout.value = settings.run_timeout_seconds ?? "";
    ui.maxRuns.value = settings.max_concurrent_runs ?? "";
    ui.dialog.showModal();
  }

  async function save() {
    const settings = {
      error_workflow_id: ui.errorWorkflow.value || null,
      run_timeout_seconds: numberOrNull(ui.timeout),
      max_concurrent_runs: numberOrNull(ui.maxRuns),
    };
    ui.save.disabled = true;
    try {
      const resp = await request("PATCH", `/api/v1/workflows/${workflowId}`, { settings });
      if (!resp.ok) {
        const field = resp.data?.field ? ` (${resp.data.field.replace("settings.", "")})` : "";
        ui.error.textContent = `${errorMessage(resp)}${field}`;
        ui.error.hidden = false;
        return;
      }
      ui.dialog.close();
      setStatus("Settings saved", "ok");
    } catch (err) {
      ui.error.textContent = err.message;
      ui.error.hidden = false;
    } finally {
      ui.save.disabled = false;
    }
  }

  button.addEventListener("click", () => open().catch((err) => setStatus(err.message, "error")));
  ui.cancel.addEventListener("click", () => ui.dialog.close());
  ui.save.addEventListener("click", save);
}
