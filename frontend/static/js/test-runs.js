// Testing without publishing, in the designer (docs/designer.md, "Testing without
// publishing"): pinned data per node, "Test step", "Test workflow", the live run overlay
// on the canvas, a step's input/output/error, and replay from a step with its input edited.
//
// API: GET/PUT /api/v1/workflows/{id}/pins[/{node}], DELETE .../pins/{node},
// POST /api/workflows/{id}/test-runs {step_id?, input?}, POST /api/v1/runs/{id}/replay
// {step_id, input}; live updates from GET /runs/{id}/events (Server-Sent Events).

import { errorMessage, getJSON, postJSON, putJSON, request } from "./api.js";
import { followRun, formatDuration, overlayOf, runEnded, valueBlock } from "./run-overlay.js";

function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c) e.append(c);
  return e;
}

function parseJSONField(text) {
  try {
    return { ok: true, value: text.trim() ? JSON.parse(text) : null };
  } catch (err) {
    return { ok: false, message: `Invalid JSON: ${err.message}` };
  }
}

export class TestRuns {
  /**
   * @param {object} o  workflowId, model (DiagramModel), canvas (Canvas), save() -> Promise<bool>
   *   (saves the draft first; a reader's test uses the saved draft), setStatus(text, kind),
   *   canEdit, canRun, section (the #test-data element), overlayBar (#run-overlay),
   *   testButton (#test-btn or null)
   */
  constructor(o) {
    Object.assign(this, o);
    this.pins = {};
    this.run = null; // the run drawn on the canvas (run detail JSON)
    this.follow = null;
    this.nodeId = null;
    this.editing = null; // "pin" | "replay" | null
    this.testButton?.addEventListener("click", () => this.testWorkflow());
    this.loadPins();
    const runId = new URLSearchParams(location.search).get("run");
    if (runId) this.show(runId);
  }

  async loadPins() {
    const resp = await getJSON(`/api/v1/workflows/${this.workflowId}/pins`);
    if (resp.ok && resp.data) this.pins = resp.data;
    this.pinsChanged();
  }

  /** Redraw after pins changed, and tell the field picker (its examples come from them). */
  pinsChanged() {
    document.dispatchEvent(new CustomEvent("railyard:pins-changed"));
    this.paint();
    this.render();
  }

  /**
   * Draw on the canvas: without a run, "pinned" under each node with pinned data; with a
   * run, its statuses, and under each node its attempts and duration, or where the test
   * replaced the step by data, "pinned data" / "last run data" (the step did not execute).
   */
  paint() {
    if (!this.run) {
      const notes = {};
      for (const id of Object.keys(this.pins)) notes[id] = "pinned";
      this.canvas.setStatuses({}, {}, notes);
      return;
    }
    const o = overlayOf(this.model.toJSON(), this.run);
    for (const [id, how] of Object.entries(this.info?.substituted || {})) {
      o.notes[id] = how === "pinned" ? "pinned data" : "last run data";
    }
    this.canvas.setStatuses(o.statuses, o.edges, o.notes);
  }

  /** The canvas selection changed: a node id, or null. */
  select(nodeId) {
    if (nodeId !== this.nodeId) this.editing = null;
    this.nodeId = nodeId;
    this.render();
  }

  /**
   * Pin ``text`` (JSON) on ``nodeId`` (saving the draft first): null when pinned, else what
   * went wrong (invalid JSON, the draft not saved, the server's refusal).
   */
  async savePin(nodeId, text) {
    const parsed = parseJSONField(text);
    if (!parsed.ok) return parsed.message;
    if (!(await this.save())) return "Save the draft first";
    const resp = await putJSON(`/api/v1/workflows/${this.workflowId}/pins/${encodeURIComponent(nodeId)}`, { data: parsed.value });
    if (!resp.ok) return errorMessage(resp);
    this.pins[nodeId] = resp.data;
    this.editing = null;
    this.setStatus(`Data pinned on ${nodeId}`, "ok");
    this.pinsChanged();
    return null;
  }

  /** Remove the pin of ``nodeId`` (a pin already gone is no error). */
  async unpin(nodeId) {
    const resp = await request("DELETE", `/api/v1/workflows/${this.workflowId}/pins/${encodeURIComponent(nodeId)}`);
    if (!resp.ok && resp.status !== 404) { this.setStatus(errorMessage(resp), "error"); return; }
    delete this.pins[nodeId];
    this.pinsChanged();
  }

  // ------------------------------------------------------------------ runs

  async start(body, what) {
    if (this.canEdit && !(await this.save())) {
      this.setStatus(`${what} not started: the draft could not be saved`, "error");
      return;
    }
    this.setStatus(`${what}: starting…`, "busy");
    let resp;
    try {
      resp = await postJSON(`/api/v1/workflows/${this.workflowId}/test-runs`, body);
    } catch (err) {
      this.setStatus(`${what} failed: ${err.message}`, "error");
      return;
    }
    if (!resp.ok) {
      const n = resp.data?.diagnostics?.length;
      this.setStatus(n ? `${what} not started: the draft has ${n} problem(s)` : `${what} failed: ${errorMessage(resp)}`, "error");
      return;
    }
    const real = resp.data.executes || [];
    this.setStatus(
      real.length ? `${what} started · really runs: ${real.join(", ")}` : `${what} started · no connector is called`,
      "ok",
    );
    this.show(resp.data.id, { executes: real, substituted: resp.data.substituted || {} });
  }

  testWorkflow() {
    return this.start({}, "Test run");
  }

  testStep(nodeId) {
    return this.start({ step_id: nodeId }, "Test step");
  }

  async replay(nodeId, input) {
    const resp = await postJSON(`/api/v1/runs/${this.run.id}/replay`, { step_id: nodeId, input });
    if (!resp.ok) return errorMessage(resp);
    this.editing = null;
    this.setStatus(`Replay from ${nodeId} started`, "ok");
    this.show(resp.data.id);
    return null;
  }

  /** Draw run `runId` over the canvas and follow it live until it ends. */
  show(runId, info = {}) {
    this.follow?.stop();
    this.info = info;
    this.run = { id: runId, status: "queued", steps: [] };
    this.renderBar();
    this.follow = followRun(runId, (run) => this.update(run), {
      onStale: (stale) => this.overlayBar.classList.toggle("stale", stale),
    });
  }

  update(run) {
    this.run = run;
    this.paint();
    this.renderBar();
    if (!this.editing) this.render(); // keep what is being typed
  }

  clear() {
    this.follow?.stop();
    this.follow = null;
    this.run = null;
    this.editing = this.editing === "replay" ? null : this.editing;
    this.info = {};
    this.paint();
    this.renderBar();
    this.render();
  }

  renderBar() {
    const bar = this.overlayBar;
    if (!this.run) {
      bar.hidden = true;
      bar.replaceChildren();
      return;
    }
    const r = this.run;
    const kind = r.test ? "Test run" : r.trigger === "replay" ? "Replay" : "Run";
    const badge = h("span", { class: `badge status-${r.status}`, id: "overlay-status", text: String(r.status).replace(/_/g, " ") });
    const link = h("a", { href: `/runs/${r.id}`, id: "overlay-run-link", text: "open run" });
    const close = h("button", { type: "button", class: "btn btn-small", id: "overlay-clear", title: "Hide the run from the canvas", text: "Clear" });
    close.addEventListener("click", () => this.clear());
    const dur = formatDuration(r.duration_ms);
    const real = this.info?.executes;
    const called = real ? h("span", {
      class: "overlay-executes small",
      id: "overlay-executes",
      title: "Action steps this test run really executes (their connectors are called); pin data on a step to keep it from running",
      text: real.length ? `· really runs: ${real.join(", ")}` : "· no connector called",
    }) : null;
    const parts = [h("span", { text: `${kind} ` }), badge, dur ? h("span", { class: "muted", text: ` ${dur} ` }) : null, called, " ", link, " ", close];
    bar.replaceChildren(...parts.filter((p) => p !== null));
    bar.dataset.runId = r.id;
    bar.dataset.status = r.status;
    bar.hidden = false;
  }

  // ------------------------------------------------------------------ the section

  render() {
    const node = this.nodeId ? this.model.node(this.nodeId) : null;
    const section = this.section;
    if (!node || node.type === "ui.note") {
      section.hidden = true;
      section.replaceChildren();
      return;
    }
    section.hidden = false;
    section.dataset.nodeId = node.id;
    // editing a pin or a replay input: the section takes the room the editor needs
    section.classList.toggle("editing", Boolean(this.editing));
    const parts = [h("h3", { class: "test-data-title", text: "Test data" })];
    parts.push(this.pinBox(node));
    const isTrigger = this.model.spec(node.type)?.kind === "trigger";
    if (this.canRun && !isTrigger) {
      const btn = h("button", { type: "button", class: "btn btn-small", id: "test-step-btn", title: "Run this step with the data of the steps before it (pinned, else from the last run); nothing after it runs", text: "Test step" });
      btn.addEventListener("click", () => this.testStep(node.id));
      parts.push(h("p", { class: "test-actions" }, btn));
    }
    const step = this.run?.steps?.find((s) => s.step_id === node.id);
    if (this.run) parts.push(this.stepBox(node, step));
    section.replaceChildren(...parts);
    this.onRender?.();
  }

  pinBox(node) {
    const pin = this.pins[node.id];
    const box = h("div", { class: "pin-box", id: "pin-box" });
    const isTrigger = this.model.spec(node.type)?.kind === "trigger";
    const what = isTrigger ? "the input of test runs" : "this step's output in test runs (the step is not executed)";
    if (this.editing === "pin") {
      const area = h("textarea", { id: "pin-editor", class: "mono", rows: 14, spellcheck: "false", "aria-label": "Pinned data (JSON)" });
      const step = this.run?.steps?.find((s) => s.step_id === node.id);
      area.value = JSON.stringify(pin ? pin.data : step?.output ?? (isTrigger ? this.run?.input ?? {} : {}), null, 2);
      const err = h("p", { class: "field-error", id: "pin-error", hidden: true });
      const saveBtn = h("button", { type: "button", class: "btn btn-small btn-primary", id: "pin-save", text: "Save pin" });
      const cancel = h("button", { type: "button", class: "btn btn-small", text: "Cancel" });
      cancel.addEventListener("click", () => { this.editing = null; this.render(); });
      saveBtn.addEventListener("click", async () => {
        const problem = await this.savePin(node.id, area.value);
        if (problem) { err.textContent = problem; err.hidden = false; }
      });
      box.append(h("p", { class: "small muted", text: `Pinned data is ${what}.` }), area, err, h("p", { class: "test-actions" }, saveBtn, " ", cancel));
      requestAnimationFrame(() => saveBtn.scrollIntoView({ block: "nearest" }));
      return box;
    }
    if (pin) {
      box.classList.add("pinned");
      box.append(h("p", { class: "small" }, h("span", { class: "badge badge-pinned", text: "pinned" }), ` ${what}`));
      box.append(valueBlock(pin.data, "pin-data"));
    } else {
      box.append(h("p", { class: "small muted", text: `No pinned data. Pin sample data to use it as ${what}.` }));
    }
    if (this.canEdit) {
      const edit = h("button", { type: "button", class: "btn btn-small", id: "pin-edit", text: pin ? "Edit pin" : "Pin data" });
      edit.addEventListener("click", () => { this.editing = "pin"; this.render(); });
      const row = h("p", { class: "test-actions" }, edit);
      if (pin) {
        const unpin = h("button", { type: "button", class: "btn btn-small", id: "pin-remove", text: "Unpin" });
        unpin.addEventListener("click", () => this.unpin(node.id));
        row.append(" ", unpin);
      }
      box.append(row);
    }
    return box;
  }

  stepBox(node, step) {
    const box = h("div", { class: "step-result", id: "step-result" });
    if (!step) {
      const status = runEnded(this.run.status) ? "not run" : "pending";
      box.append(h("p", { class: "small" }, h("span", { class: "badge status-not_run", id: "step-result-status", text: status }), " in this run"));
      return box;
    }
    const attempts = (step.attempts || []).length;
    const facts = [attempts ? `${attempts} attempt${attempts > 1 ? "s" : ""}` : "", formatDuration(step.duration_ms)].filter(Boolean).join(" · ");
    box.append(h("p", { class: "small" },
      h("span", { class: `badge status-${step.status}`, id: "step-result-status", text: String(step.status).replace(/_/g, " ") }),
      facts ? ` ${facts}` : ""));
    const io = (label, value, cls, open) => {
      const d = h("details", { class: `io ${cls}`, open });
      d.append(h("summary", { text: label }), valueBlock(value));
      return d;
    };
    box.append(io("Input", step.input, "step-input", false));
    box.append(io("Output", step.output, "step-output", true));
    if (step.error) box.append(io("Error", step.error, "step-error io-error", true));
    if (this.canRun && runEnded(this.run.status) && !["pending", "skipped", "not_run"].includes(step.status)) {
      box.append(this.replayBox(node, step));
    }
    return box;
  }

  replayBox(node, step) {
    const wrap = h("div", { class: "replay-box" });
    if (this.editing !== "replay") {
      const btn = h("button", { type: "button", class: "btn btn-small", id: "replay-edit", title: "A new run of the same version from this step, with its input edited; the steps before it keep their outputs", text: "Replay from here…" });
      btn.addEventListener("click", () => { this.editing = "replay"; this.render(); });
      wrap.append(btn);
      return wrap;
    }
    const area = h("textarea", { id: "replay-input", class: "mono", rows: 8, spellcheck: "false", "aria-label": "Input of the replayed step (JSON)" });
    area.value = JSON.stringify(step.input ?? null, null, 2);
    const err = h("p", { class: "field-error", id: "replay-error", hidden: true });
    const go = h("button", { type: "button", class: "btn btn-small btn-primary", id: "replay-start", text: "Replay" });
    const cancel = h("button", { type: "button", class: "btn btn-small", text: "Cancel" });
    cancel.addEventListener("click", () => { this.editing = null; this.render(); });
    go.addEventListener("click", async () => {
      const parsed = parseJSONField(area.value);
      if (!parsed.ok) { err.textContent = parsed.message; err.hidden = false; return; }
      go.disabled = true;
      const problem = await this.replay(node.id, parsed.value);
      go.disabled = false;
      if (problem) { err.textContent = problem; err.hidden = false; }
    });
    wrap.append(h("label", { for: "replay-input", class: "small", text: `Input of ${node.id} for the replay` }), area, err, h("p", { class: "test-actions" }, go, " ", cancel));
    return wrap;
  }
}
