// The config panel (#config-panel): server-rendered HTML for the selected node
// (POST /designer/config-panel), read back into the node on every input/change.
// How each data-kind is read is documented in frontend/forms.py.

import { errorMessage, postJSON } from "./api.js";

export class ConfigPanel {
  constructor(container, model, { onStatus }) {
    this.container = container;
    this.model = model;
    this.onStatus = onStatus;
    this.nodeId = null;
    this.seq = 0; // drops responses of panels that are no longer wanted
    this.diagnostics = [];
    this.placeholder = container.innerHTML;
    container.addEventListener("input", (e) => this.onEdit(e));
    container.addEventListener("change", (e) => this.onEdit(e));
    container.addEventListener("click", (e) => this.onClick(e));
  }

  async open(nodeId) {
    const node = this.model.node(nodeId);
    if (!node) return this.close();
    this.nodeId = nodeId;
    const seq = ++this.seq;
    this.container.classList.add("loading");
    let resp;
    try {
      resp = await postJSON("/designer/config-panel", {
        node_type: node.type,
        node_id: node.id,
        label: node.label,
        config: node.config,
      });
    } catch (err) {
      if (seq === this.seq) this.showError(err.message);
      return;
    } finally {
      if (seq === this.seq) this.container.classList.remove("loading");
    }
    if (seq !== this.seq) return;
    if (!resp.ok) return this.showError(errorMessage(resp));
    this.container.innerHTML = resp.text;
    this.container.scrollTop = 0;
    this.showDiagnostics(this.diagnostics);
  }

  close() {
    this.seq++;
    this.nodeId = null;
    this.container.classList.remove("loading");
    this.container.innerHTML = this.placeholder;
  }

  showError(message) {
    this.container.innerHTML = "";
    const p = document.createElement("p");
    p.className = "alert alert-error";
    p.textContent = `Could not load the settings: ${message}`;
    this.container.appendChild(p);
    this.onStatus(message, "error");
  }

  onClick(e) {
    const add = e.target.closest(".kv-add");
    const remove = e.target.closest(".kv-remove");
    if (add) {
      const rows = add.closest(".kv-editor").querySelector(".kv-rows");
      const row = kvRow();
      rows.appendChild(row);
      row.querySelector(".kv-key").focus();
    } else if (remove) {
      const editor = remove.closest(".kv-editor");
      remove.closest(".kv-row").remove();
      this.apply(editor);
    }
  }

  onEdit(e) {
    const t = e.target;
    if (t.matches("input[type=text], textarea")) t.classList.toggle("is-expression", t.value.startsWith("="));
    this.apply(t);
  }

  /** Read every control back into the node's label and config. */
  apply(source) {
    const form = this.container.querySelector(".config-form");
    const node = this.model.node(this.nodeId);
    if (!form || !node || form.dataset.nodeId !== node.id) return;
    const config = { ...node.config };
    let label = node.label;
    for (const control of form.querySelectorAll("[data-field]")) {
      const field = control.dataset.field;
      if (field === "__label") {
        label = control.value;
        continue;
      }
      const result = readControl(control);
      markInvalid(control, result.error);
      if (result.error) continue; // keep the last good value until the JSON parses
      if (result.omit) delete config[field];
      else config[field] = result.value;
    }
    if (config.on_error === "fail") delete config.on_error; // the default
    this.model.updateNode(node.id, { label, config });
  }

  /** Show the diagnostics of the open node inline (replacing the server-rendered ones). */
  showDiagnostics(all) {
    this.diagnostics = all || [];
    const form = this.container.querySelector(".config-form");
    if (!form) return;
    const mine = this.diagnostics.filter((d) => d.node_id === form.dataset.nodeId);
    for (const old of form.querySelectorAll(".field-error:not(.parse-error), .node-error")) old.remove();
    for (const wrap of form.querySelectorAll(".field.has-error")) wrap.classList.remove("has-error");
    const top = form.querySelector(".node-errors");
    for (const d of mine) {
      const name = d.field ? d.field.split(".")[0].split("[")[0] : null;
      const wrap = name && form.querySelector(`[data-field-wrap="${CSS.escape(name)}"]`);
      const p = document.createElement("p");
      p.setAttribute("role", "alert");
      p.textContent = d.message;
      if (wrap) {
        p.className = "field-error";
        wrap.classList.add("has-error");
        wrap.appendChild(p);
      } else if (top) {
        p.className = `node-error severity-${d.severity}`;
        top.appendChild(p);
      }
    }
  }
}

function kvRow() {
  const row = document.createElement("div");
  row.className = "kv-row";
  const key = Object.assign(document.createElement("input"), { type: "text", className: "kv-key", placeholder: "key" });
  const value = Object.assign(document.createElement("input"), { type: "text", className: "kv-value", placeholder: "value" });
  key.setAttribute("aria-label", "Key");
  value.setAttribute("aria-label", "Value");
  const remove = Object.assign(document.createElement("button"), { type: "button", className: "kv-remove icon-btn", title: "Remove row", textContent: "×" });
  row.append(key, value, remove);
  return row;
}

const isExpr = (control, text) => control.hasAttribute("data-expression") && text.startsWith("=");

/** -> {value} | {omit: true} | {error: "..."} */
function readControl(control) {
  const kind = control.dataset.kind;
  if (kind === "kv") return readKv(control);
  if (kind === "boolean" && control.type === "checkbox") return { value: control.checked };
  const text = control.value;
  if (text.trim() === "") return { omit: true };
  if (isExpr(control, text)) return { value: text };
  switch (kind) {
    case "number":
    case "integer": {
      const n = Number(text);
      if (!Number.isFinite(n) || (kind === "integer" && !Number.isInteger(n))) {
        return { error: kind === "integer" ? "Enter a whole number" : "Enter a number" };
      }
      return { value: n };
    }
    case "boolean":
      if (text === "true" || text === "false") return { value: text === "true" };
      return { error: "Enter true, false or an expression starting with =" };
    case "enum":
      return { value: control.hasAttribute("data-json") ? JSON.parse(text) : text };
    case "json":
      try {
        return { value: JSON.parse(text) };
      } catch (err) {
        return { error: `Invalid JSON: ${err.message}` };
      }
    default:
      return { value: text };
  }
}

function readKv(editor) {
  const valueKind = editor.dataset.valueKind || "auto";
  const out = {};
  for (const row of editor.querySelectorAll(".kv-row")) {
    const key = row.querySelector(".kv-key").value.trim();
    if (!key) continue;
    const text = row.querySelector(".kv-value").value;
    out[key] = kvValue(text, valueKind);
  }
  return { value: out };
}

function kvValue(text, valueKind) {
  if (text.startsWith("=") || valueKind === "string") return text;
  if (valueKind === "number" || valueKind === "integer") {
    const n = Number(text);
    return text.trim() !== "" && Number.isFinite(n) ? n : text;
  }
  if (valueKind === "boolean") return text === "true" ? true : text === "false" ? false : text;
  // auto: JSON literals (numbers, true, null, {...}) are parsed, anything else is a string.
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function markInvalid(control, message) {
  const wrap = control.closest(".field");
  if (!wrap) return;
  let p = wrap.querySelector(".field-error.parse-error");
  control.classList.toggle("invalid", Boolean(message));
  if (!message) {
    if (p) p.remove();
    return;
  }
  if (!p) {
    p = document.createElement("p");
    p.className = "field-error parse-error";
    p.setAttribute("role", "alert");
    wrap.appendChild(p);
  }
  p.textContent = message;
}
