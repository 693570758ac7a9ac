// The config panel (#config-panel): server-rendered HTML for the selected node
// (POST /designer/config-panel), read back into the node on every input/change.
// How each data-kind is read is documented in frontend/forms.py.
// Field widgets (how each kind is read, chips, durations, groups) live in fields.js; its
// onFieldMount() hook is where an expression editor attaches to a field.
// Expression fields have an "fx" toggle: the literal widget and an expression input are
// both in the page, only the live one carries data-field (the other data-field-off).
// Credential pickers link to /credentials; beforeLeave() (the designer saves its draft)
// runs before the page is left.

import { errorMessage, postJSON } from "./api.js";
import { chipsKeydown, commitChips, kvRow, literalText, markInvalid, mountFields, readControl, removeChip, setLiteral } from "./fields.js";
import { isNote } from "./model.js";
import { attachWorkflowPickers } from "./workflow-picker.js";

export class ConfigPanel {
  /**
   * readOnly: the user may not edit; every control is shown but cannot change (text can
   * still be selected and copied) and nothing is read back into the node.
   */
  constructor(container, model, { onStatus, beforeLeave = async () => true, workflowId = "", readOnly = false }) {
    this.container = container;
    this.readOnly = readOnly;
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
    container.addEventListener("keydown", (e) => this.onKeydown(e));
    container.addEventListener("focusout", (e) => this.onFocusOut(e));
    container.addEventListener("paste", (e) => this.onPaste(e));
    attachWorkflowPickers(container, { workflowId, onPick: (picker) => this.apply(picker) });
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
    const form = this.container.querySelector(".config-form");
    if (form) mountFields(form, this);
    if (form) this.showUnparsed(form, node);
    if (form && this.readOnly) lockForm(form);
    this.container.dispatchEvent(new CustomEvent("config-panel:rendered", { detail: { nodeId, form } }));
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
    if (this.readOnly) lockForm(form);
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
    if (this.readOnly) return;
    const add = e.target.closest(".kv-add");
    const remove = e.target.closest(".kv-remove");
    const fx = e.target.closest(".fx-toggle");
    const newCredential = e.target.closest("a.credential-new");
    const chipRemove = e.target.closest(".chip-remove");
    if (chipRemove) {
      const editor = chipRemove.closest(".chips-editor");
      removeChip(chipRemove.closest(".value-chip"));
      this.apply(editor);
    } else if (fx) {
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

  onKeydown(e) {
    if (this.readOnly) return;
    if (chipsKeydown(e)) this.apply(e.target.closest(".chips-editor"));
    else if (e.key === "Enter" && e.target.classList.contains("kv-value")) {
      // Enter in the last value adds a row
      const row = e.target.closest(".kv-row");
      if (!row.nextElementSibling) {
        e.preventDefault();
        const next = kvRow();
        row.after(next);
        next.querySelector(".kv-key").focus();
      }
    }
  }

  /** Leaving a chip box with text in it adds that text (a typed address is not lost). */
  onFocusOut(e) {
    const input = e.target.closest(".chip-input");
    if (input && input.value.trim()) {
      commitChips(input.closest(".chips-editor"));
      this.apply(input);
    }
  }

  /** Pasting "a@x.com, b@y.com" into a chip box adds one chip per entry. */
  onPaste(e) {
    const input = e.target.closest(".chip-input");
    const text = e.clipboardData ? e.clipboardData.getData("text") : "";
    if (!input || !/[,;\n]/.test(text)) return;
    e.preventDefault();
    input.value = `${input.value}${text}`;
    commitChips(input.closest(".chips-editor"));
    this.apply(input);
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
    if (t.hasAttribute("data-aux")) {
      // search and chip boxes hold no value yet; typing clears a rejected entry's error
      if (t.classList.contains("chip-input")) markInvalid(t, null);
      return;
    }
    if (t.matches("input[type=text], textarea")) t.classList.toggle("is-expression", t.value.startsWith("="));
    this.apply(t);
  }

  /** Read every control back into the node's label and config. */
  apply(source) {
    if (this.readOnly) return;
    const form = this.container.querySelector(".config-form");
    const node = this.model.node(this.nodeId);
    if (!form || !node || form.dataset.nodeId !== node.id) return;
    const config = { ...node.config };
    const unparsed = {};
    let label = node.label;
    for (const control of form.querySelectorAll("[data-field]")) {
      const field = control.dataset.field;
      if (field === "__label") {
        label = control.value;
        continue;
      }
      const result = readControl(control);
      // a group marks its own sub-fields; its error is not repeated on the group
      if (control.dataset.kind !== "group") markInvalid(control, result.error);
      // keep the last good value until the JSON parses, and the typed text beside it
      if (result.error && control.dataset.kind === "json") unparsed[field] = control.value;
      if (result.error) continue;
      if (result.omit) delete config[field];
      else config[field] = result.value;
    }
    if (config.on_error === "fail") delete config.on_error; // the default
    this.model.updateNode(node.id, { label, config, unparsed });
  }

  /** Put back the JSON text of ``node.unparsed`` (typed, saved, not valid) with its parse error. */
  showUnparsed(form, node) {
    for (const [field, text] of Object.entries(node.unparsed || {})) {
      const control = form.querySelector(`textarea[data-kind="json"][data-field="${CSS.escape(field)}"]`);
      if (!control) continue;
      control.value = text;
      markInvalid(control, readControl(control).error);
      control.dispatchEvent(new Event("input")); // repaints the coloured copy (no bubbling: no edit)
    }
    this.showDiagnostics(this.diagnostics);
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
      const wrap = (d.field && form.querySelector(`[data-field-wrap="${CSS.escape(d.field)}"]`))
        || (name && form.querySelector(`[data-field-wrap="${CSS.escape(name)}"]`));
      // a field whose text does not parse shows that error once: its own, as typed
      if (wrap && wrap.querySelector(':scope > .field-error.parse-error[data-source="value"]')) continue;
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

/**
 * Show a form without letting it change: text stays selectable (readonly), every other
 * control is disabled; the form says why.
 */
function lockForm(form) {
  form.classList.add("read-only");
  for (const c of form.querySelectorAll("input, textarea, select, button")) {
    const text = (c.tagName === "INPUT" && /^(text|search|number|url|email|)$/.test(c.type)) || c.tagName === "TEXTAREA";
    if (text) c.readOnly = true;
    else c.disabled = true;
  }
  const note = document.createElement("p");
  note.className = "hint read-only-note";
  note.textContent = "Read only: you may look at these settings but not change them.";
  form.prepend(note);
}

/** Make `control` the live one of a field (data-field) or park it (data-field-off). */
function setLive(control, live, name) {
  control.removeAttribute(live ? "data-field-off" : "data-field");
  control.setAttribute(live ? "data-field" : "data-field-off", name);
}
