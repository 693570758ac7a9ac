// The step data view (docs/designer.md, "Step data view"), like n8n's: a node opened wide
// shows its INPUT on the left, its settings in the middle (the config panel itself) and its
// OUTPUT on the right, each as a table, JSON or schema (data-shapes.js). The data comes
// from the run drawn on the canvas (a test run or a run opened with ?run=), the workflow's
// last run (GET /api/v1/runs?workflow_id=&limit=1, then GET /api/v1/runs/{id}) or pinned
// data (the output's own pin; the input from the pin of the one step before it); a
// selector picks one when several exist. Before any of these exists, the input side shows
// what is known without data: the input's fields as the steps before declare them (the
// field picker's list, POST .../expressions/fields: declared and inferred schemas, with
// examples from a webhook test call or pinned data further up) and how to get real data. The output side pins and edits pins (TestRuns'
// savePin/unpin: the pins routes); a field dragged from the input side onto a setting maps
// it (field-drag.js). Opened with "Open data view", a double click on a node or Enter on
// that button; closed with "Close" or Escape.

import { getJSON } from "./api.js";
import { fieldsView, el as h, jsonView, schemaView, tableView } from "./data-shapes.js";
import { dragFieldsFrom } from "./field-drag.js";
import { fieldSource } from "./field-picker.js";

// How a field of the data view gets into a setting: the button is the expression editor's
// "Fields" (expression-editor.js).
const MAP_HINT = "Drag a field onto a setting to map it (or use the setting's Fields button).";

const VIEWS = [["table", "Table"], ["json", "JSON"], ["schema", "Schema"]];
const VIEW_KEY = "railyard.designer.data-view."; // + side: the chosen view, per browser

export class StepDataView {
  /**
   * @param {object} o  root (#designer), bar (#data-view-bar), input (#data-input),
   *   output (#data-output), canvasEl (the svg), model, testRuns (TestRuns), workflowId,
   *   canEdit (pin actions and dragging fields; a reader only looks)
   */
  constructor(o) {
    Object.assign(this, o);
    this.nodeId = null;
    this.isOpen = false;
    this.lastRun = null; // run detail JSON of the workflow's newest run
    this.lastRunFetched = false;
    this.choice = { input: null, output: null }; // chosen source key per side
    this.editingPin = false;
    this.fields = fieldSource(this.workflowId, this.model);
    this.known = null; // {nodeId, input}: the input's field group of the field picker
    this.testRuns.onRender = () => this.refresh();
    dragFieldsFrom(this.input);
    this.canvasEl.addEventListener("dblclick", (e) => {
      const node = e.target.closest?.("g.node[data-node-id]");
      if (node && this.model.node(node.dataset.nodeId)) this.open();
    });
    this.root.querySelector(".side-panels").addEventListener("keydown", (e) => {
      if (e.key === "Escape" && this.isOpen && !e.defaultPrevented && !e.target.closest("dialog, .quick-add, .field-picker")) {
        e.stopPropagation();
        this.close({ focus: true });
      }
    });
  }

  /** The canvas selection changed: a node id or null. */
  select(nodeId) {
    const node = nodeId ? this.model.node(nodeId) : null;
    if (nodeId !== this.nodeId) {
      this.choice = { input: null, output: null };
      this.editingPin = false;
    }
    this.nodeId = node && node.type !== "ui.note" ? nodeId : null;
    if (!this.nodeId) this.close();
    this.renderBar();
    this.refresh();
  }

  async open() {
    if (!this.nodeId) return;
    this.isOpen = true;
    this.root.classList.add("data-view-open");
    this.renderBar();
    this.refresh();
    this.bar.querySelector("button")?.focus();
    await this.fetchLastRun();
    this.refresh();
  }

  /** Back to the canvas; ``focus``: the keyboard focus goes to "Open data view" (closed by the user). */
  close({ focus = false } = {}) {
    if (!this.isOpen) return;
    this.isOpen = false;
    this.editingPin = false;
    this.root.classList.remove("data-view-open");
    this.input.hidden = true;
    this.output.hidden = true;
    this.renderBar();
    if (focus) this.bar.querySelector("button")?.focus();
  }

  async fetchLastRun() {
    const list = await getJSON(`/api/v1/runs?workflow_id=${encodeURIComponent(this.workflowId)}&limit=1`);
    const newest = list.ok ? list.data?.data?.[0] : null;
    if (!newest) return;
    if (this.lastRun?.id === newest.id && this.lastRun.status === newest.status) return;
    const detail = await getJSON(`/api/v1/runs/${newest.id}`);
    if (detail.ok) this.lastRun = detail.data;
  }

  renderBar() {
    this.bar.hidden = !this.nodeId;
    if (!this.nodeId) return this.bar.replaceChildren();
    const btn = h("button", {
      type: "button", class: "btn btn-small", id: "data-view-btn", "aria-expanded": String(this.isOpen),
      title: this.isOpen ? "Back to the canvas (Escape)" : "The step's input, settings and output side by side (or double-click the node)",
      text: this.isOpen ? "Close data view" : "Open data view",
    });
    btn.addEventListener("click", () => (this.isOpen ? this.close({ focus: true }) : this.open()));
    const parts = [btn];
    if (this.isOpen) parts.unshift(h("strong", { class: "data-view-title", text: `Step data: ${this.nodeId}` }));
    this.bar.replaceChildren(...parts);
  }

  // ------------------------------------------------------------------ sources

  /** {key, label, value} of one step in one run, or null. */
  runSource(key, run, side) {
    const step = run?.steps?.find((s) => s.step_id === this.nodeId);
    if (!step || step[side] === undefined || ["pending", "skipped", "not_run"].includes(step.status)) return null;
    const kind = run.test ? "Test run" : run.trigger === "replay" ? "Replay" : "Run";
    const label = key === "shown" ? `${kind} on the canvas` : `Last run (${kind.toLowerCase()}, ${run.status})`;
    return { key, label, value: step[side] };
  }

  /** Every source of ``side`` ("input" | "output"), the preferred first. */
  sources(side) {
    const shown = this.testRuns.run;
    const found = [this.runSource("shown", shown, side)];
    if (this.lastRun && this.lastRun.id !== shown?.id) found.push(this.runSource("last", this.lastRun, side));
    const pins = this.testRuns.pins;
    if (side === "output" && pins[this.nodeId]) found.unshift({ key: "pin", label: "Pinned data", value: pins[this.nodeId].data });
    if (side === "input") {
      const before = this.model.edges.filter((e) => e.target === this.nodeId).map((e) => e.source);
      if (before.length === 1 && pins[before[0]]) found.push({ key: "pin", label: `Pinned on ${before[0]}`, value: pins[before[0]].data });
    }
    return found.filter(Boolean);
  }

  // ------------------------------------------------------------------ columns

  refresh() {
    if (!this.isOpen || !this.nodeId) return;
    this.renderSide("input", this.input);
    if (!this.editingPin) this.renderSide("output", this.output);
  }

  /** The input's fields as the field picker knows them (for an input without data). */
  async fetchKnown() {
    const nodeId = this.nodeId;
    if (!nodeId || this.known?.nodeId === nodeId) return;
    this.known = { nodeId, input: null };
    try {
      const result = await this.fields.groups(nodeId);
      if (this.known?.nodeId !== nodeId) return;
      this.known.input = (result.sources || []).find((g) => g.prefix === "") || null;
    } catch {
      return; // no field list: the input side keeps saying how to get data
    }
    this.refresh();
  }

  renderSide(side, col) {
    col.hidden = false;
    const all = this.sources(side);
    if (side === "input" && !all.length) return this.renderKnown(col);
    const chosen = all.find((s) => s.key === this.choice[side]) || all[0] || null;
    const title = side === "input" ? "Input" : "Output";
    const head = h("div", { class: "data-head" }, h("h3", { class: "data-title", id: `data-${side}-title`, text: title }));
    if (all.length > 1) {
      const select = h("select", { id: `data-${side}-source`, class: "data-source", "aria-label": `${title} data from` });
      for (const s of all) select.append(h("option", { value: s.key, text: s.label, selected: s === chosen }));
      select.addEventListener("change", () => {
        this.choice[side] = select.value;
        this.renderSide(side, col);
        col.querySelector(".data-source")?.focus();
      });
      head.append(select);
    } else {
      head.append(h("span", { class: "data-source small muted", id: `data-${side}-source`, text: chosen ? `From: ${chosen.label}` : "No data yet" }));
    }
    const view = localStorage.getItem(VIEW_KEY + side) || "table";
    const switcher = h("div", { class: "data-views", role: "group", "aria-label": `${title} view` });
    for (const [key, label] of VIEWS) {
      const b = h("button", { type: "button", class: "btn btn-small", "data-view": key, "aria-pressed": String(key === view), text: label });
      b.addEventListener("click", () => {
        localStorage.setItem(VIEW_KEY + side, key);
        this.renderSide(side, col);
        col.querySelector(`.data-views [data-view="${key}"]`)?.focus();
      });
      switcher.append(b);
    }
    head.append(switcher);
    const body = h("div", { class: `data-body view-${view}`, "data-source-key": chosen?.key || "" });
    // the input's fields map by dragging, for a user who may edit
    const draggable = side === "input" && this.canEdit;
    if (!chosen) body.append(h("p", { class: "muted small", text: this.emptyText(side) }));
    else if (view === "json") body.append(jsonView(chosen.value));
    else if (view === "schema") body.append(schemaView(chosen.value, draggable));
    else body.append(tableView(chosen.value, draggable));
    const parts = [head];
    if (side === "output" && this.canEdit) parts.push(this.pinActions(chosen));
    if (draggable && chosen) parts.push(h("p", { class: "hint small", text: MAP_HINT }));
    parts.push(body);
    col.replaceChildren(...parts);
  }

  /** The input side before any data: the fields known from the steps before, and how to get data. */
  renderKnown(col) {
    if (this.known?.nodeId !== this.nodeId) this.known = null;
    this.fetchKnown();
    const input = this.known?.input;
    const fields = input?.fields || [];
    const head = h("div", { class: "data-head" }, h("h3", { class: "data-title", id: "data-input-title", text: "Input" }));
    const what = fields.length ? "the fields the steps before send (no data yet)" : "no data yet";
    head.append(h("span", { class: "data-source small muted", id: "data-input-source", text: `From: ${what}` }));
    const body = h("div", { class: "data-body view-schema", "data-source-key": "known" });
    if (fields.length) body.append(fieldsView(fields, input.examples, this.canEdit));
    const parts = [head, h("p", { class: "hint small", id: "data-input-hint", text: this.emptyText("input") })];
    if (fields.length && this.canEdit) parts.push(h("p", { class: "hint small", text: MAP_HINT }));
    col.replaceChildren(...parts, body);
  }

  emptyText(side) {
    if (side === "input") {
      const before = this.model.edges.filter((e) => e.target === this.nodeId).map((e) => this.model.node(e.source)?.label || e.source);
      const pin = before.length === 1 ? `pin data on “${before[0]}”` : "pin data on the step before";
      const hook = this.model.nodes.some((n) => n.type === "trigger.webhook") ? ", or send a test call to the webhook (its settings: Listen for test call)" : "";
      return `For real data: run a test (Test step or Test workflow; steps with pinned data use it), ${pin}${hook}.`;
    }
    return "No output yet: run a test, or pin data here.";
  }

  /** Pin / Edit pin / Unpin on the output side; the editor replaces the data while open. */
  pinActions(chosen) {
    const pinned = Boolean(this.testRuns.pins[this.nodeId]);
    const row = h("p", { class: "test-actions data-pin-actions" });
    const edit = h("button", { type: "button", class: "btn btn-small", id: "data-pin-edit", text: pinned ? "Edit pin" : "Pin data" });
    edit.title = pinned ? "Edit the pinned data" : "Pin this output: test runs use it instead of running the step";
    edit.addEventListener("click", () => this.editPin(chosen));
    row.append(edit);
    if (pinned) {
      const unpin = h("button", { type: "button", class: "btn btn-small", id: "data-pin-remove", text: "Unpin" });
      unpin.addEventListener("click", () => this.testRuns.unpin(this.nodeId));
      row.append(" ", unpin);
    }
    return row;
  }

  editPin(chosen) {
    this.editingPin = true;
    const area = h("textarea", { id: "data-pin-editor", class: "mono", rows: 16, spellcheck: "false", "aria-label": "Pinned output (JSON)" });
    area.value = JSON.stringify(chosen ? chosen.value : {}, null, 2);
    const err = h("p", { class: "field-error", id: "data-pin-error", role: "alert", hidden: true });
    const save = h("button", { type: "button", class: "btn btn-small btn-primary", id: "data-pin-save", text: "Save pin" });
    const cancel = h("button", { type: "button", class: "btn btn-small", id: "data-pin-cancel", text: "Cancel" });
    cancel.addEventListener("click", () => {
      this.editingPin = false;
      this.refresh();
    });
    save.addEventListener("click", async () => {
      save.disabled = true;
      const problem = await this.testRuns.savePin(this.nodeId, area.value);
      save.disabled = false;
      if (problem) {
        err.textContent = problem;
        err.hidden = false;
        return;
      }
      this.editingPin = false;
      this.choice.output = "pin";
      this.refresh();
    });
    const head = this.output.querySelector(".data-head");
    this.output.replaceChildren(head, h("p", { class: "small muted", text: "Pinned data is this step's output in test runs (the step is not executed)." }), area, err, h("p", { class: "test-actions" }, save, " ", cancel));
    area.focus();
  }
}
