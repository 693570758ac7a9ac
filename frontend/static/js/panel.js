// The config panel (#config-panel): server-rendered HTML for the selected node
// (POST /designer/config-panel), read back into the node on every input/change.
// How each data-kind is read is documented in frontend/forms.py.
// Expression fields have an "fx" toggle: the literal widget and an expression input are
// both in the page, only the live one carries data-field (the other data-field-off).
// Credential pickers link to /credentials; beforeLeave() (the designer saves its draft)
// runs before the page is left.

import { errorMessage, postJSON } from "./api.js";
import { isNote } from "./model.js";

export class ConfigPanel {
  constructor(container, model, { onStatus, beforeLeave = async () => true }) {
    this.container = container;
    this.model = model;
    this.onStatus = onStatus;
    this.beforeLeave = beforeLeave;
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
    if (isNote(node)) return this.openNote(node);
    this.container.classList.add("loading");
    let resp;
    try {
      resp = await postJSON("/designer/config-panel", {
        node_type: node.type,
        node_id: node.id,
        label: node.label,
        config: node.config,
        return_to: location.pathname,
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

  /** A sticky note's panel: its text (no server round trip: notes have no schema). */
  openNote(node) {
    const form = document.createElement("form");
    form.className = "config-form";
    form.dataset.nodeId = node.id;
    const h = document.createElement("h2");
    h.textContent = "Sticky note";
    const hint = document.createElement("p");
    hint.className = "hint";
    hint.textContent = "A comment on the canvas. Notes are not steps: runs ignore them.";
    const label = document.createElement("label");
    label.htmlFor = "note-text";
    label.textContent = "Text";
    const text = document.createElement("textarea");
    text.id = "note-text";
    text.rows = 8;
    text.value = String(node.config.text || "");
    text.dataset.field = "text";
    text.dataset.kind = "string";
    const field = document.createElement("div");
    field.className = "field";
    field.append(label, text);
    form.append(h, hint, field);
    form.addEventListener("submit", (e) => e.preventDefault());
    this.container.replaceChildren(form);
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
    const fx = e.target.closest(".fx-toggle");
    const newCredential = e.target.closest("a.credential-new");
    if (fx) {
      this.toggleExpression(fx);
    } else if (newCredential) {
      e.preventDefault();
      this.leaveTo(newCredential.href);
    } else if (add) {
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

  async leaveTo(href) {
    if (await this.beforeLeave()) location.assign(href);
    else this.onStatus("Save the workflow before creating a credential", "error");
  }

  /** Switch a field between its literal widget and its expression input. */
  toggleExpression(button) {
    const wrap = button.closest(".field");
    const literalBox = wrap.querySelector(".literal-control");
    const exprBox = wrap.querySelector(".expression-control");
    const literal = wrap.querySelector(".literal-control [data-field], .literal-control [data-field-off]")
      || wrap.querySelector('input[type=checkbox][data-kind="boolean"]');
    const expr = exprBox.querySelector(".expr-input");
    const toExpression = button.getAttribute("aria-pressed") !== "true";
    const name = button.dataset.fxFor;
    if (toExpression) {
      const text = literalText(literal);
      expr.value = text.startsWith("=") ? text : `=${text}`;
    } else {
      setLiteral(literal, expr.value.replace(/^=/, ""));
    }
    setLive(expr, toExpression, name);
    setLive(literal, !toExpression, name);
    exprBox.hidden = !toExpression;
    if (literalBox) literalBox.hidden = toExpression;
    if (literal.type === "checkbox") literal.disabled = toExpression;
    wrap.classList.toggle("expr-mode", toExpression);
    button.classList.toggle("active", toExpression);
    button.setAttribute("aria-pressed", String(toExpression));
    markInvalid(literal, null);
    this.apply(wrap);
    (toExpression ? expr : literal).focus();
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

function setLive(control, live, name) {
  control.removeAttribute(live ? "data-field-off" : "data-field");
  control.setAttribute(live ? "data-field" : "data-field-off", name);
}

/** The literal widget's value as text (what "fx" starts the expression from). */
function literalText(control) {
  const kind = control.dataset.kind;
  if (kind === "boolean" && control.type === "checkbox") return String(control.checked);
  if (kind === "kv") {
    const result = readKv(control);
    return Object.keys(result.value).length ? JSON.stringify(result.value) : "";
  }
  if (kind === "json") {
    try {
      return control.value.trim() ? JSON.stringify(JSON.parse(control.value)) : "";
    } catch {
      return control.value;
    }
  }
  return control.value;
}

/** Put text back into a literal widget (leaving expression mode); what does not fit is dropped. */
function setLiteral(control, text) {
  const kind = control.dataset.kind;
  if (kind === "boolean" && control.type === "checkbox") {
    control.checked = text.trim() === "true";
  } else if (kind === "kv") {
    const rows = control.querySelector(".kv-rows");
    rows.replaceChildren();
    let obj = null;
    try {
      obj = JSON.parse(text);
    } catch {
      obj = null;
    }
    if (obj && typeof obj === "object" && !Array.isArray(obj)) {
      for (const [k, v] of Object.entries(obj)) {
        const row = kvRow();
        row.querySelector(".kv-key").value = k;
        row.querySelector(".kv-value").value = typeof v === "string" ? v : JSON.stringify(v);
        rows.appendChild(row);
      }
    }
  } else if (kind === "enum") {
    const match = [...control.options].find((o) => o.value === text);
    control.value = match ? text : "";
  } else if (kind === "number" || kind === "integer") {
    control.value = Number.isFinite(Number(text)) && text.trim() !== "" ? text : "";
  } else {
    control.value = text;
  }
}

const isExpr = (control, text) => control.hasAttribute("data-expression") && text.startsWith("=");

/** -> {value} | {omit: true} | {error: "..."} */
function readControl(control) {
  const kind = control.dataset.kind;
  if (kind === "kv") return readKv(control);
  if (kind === "boolean" && control.type === "checkbox") return { value: control.checked };
  const text = control.value;
  if (text.trim() === "") return { omit: true };
  if (kind === "expression") {
    if (text.trim() === "=") return { omit: true };
    return { value: text.startsWith("=") ? text : `=${text}` };
  }
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
