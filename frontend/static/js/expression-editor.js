// The expression editor of the config panel: attached to every expression control of the
// open node (the "fx" inputs, and Set-style key/value rows whose value starts with "="),
// it adds under the focused control
// - a "Fields" picker listing what the trigger and upstream steps provide (field-picker.js);
//   a click inserts the path at the cursor (and the "=" marker when it is missing);
// - autocomplete of the path being typed (arrows, Enter or Tab, Escape);
// - a live preview of the value against the last run's data, with syntax errors (and
//   their position) and the data-flow problems of the expression as you type
//   (POST /api/v1/workflows/{id}/expressions/preview: the run's evaluator and limits).
// On a JSON field (HTTP Request's and Respond's bodies, For each's items; json-text.js)
// the same editor works inside the JSON: an "=..." string is an expression, completed and
// previewed where the cursor is; the picker inserts a path into that string, or a new
// "=path" string elsewhere; a parse error shows its line and column as you type, and
// "Format" indents the JSON.
// panel.js stays unaware of it: the editor follows the panel's DOM and reports edits with
// an "input" event, which the panel reads back into the node.

import { errorMessage, postJSON } from "./api.js";
import { attachBodySchema } from "./body-schema.js";
import { fieldSource, renderPicker, suggestions } from "./field-picker.js";
import { expressionsIn, formatJson, jsonError, pathInJson, stringAt } from "./json-text.js";

const PREVIEW_DELAY_MS = 300;
const PREVIEW_CHARS = 400;
const TARGETS = '.expr-input, .kv-editor[data-expression] .kv-value, textarea[data-kind="json"][data-expression]';
const isJson = (control) => control?.dataset.kind === "json";

export function attachExpressionEditor(container, model, workflowId) {
  const fields = fieldSource(workflowId, model);
  let assist = null; // the box of the focused control
  let control = null;
  let previewTimer = null;
  let previewSeq = 0;
  let suggestState = { items: [], active: 0 };
  let suggestSeq = 0;

  new MutationObserver(() => {
    const form = container.querySelector(".config-form");
    if (!form || form.dataset.exprEnhanced) return;
    form.dataset.exprEnhanced = "1";
    assist = null;
    control = null;
    if (form.dataset.nodeType === "trigger.webhook") attachBodySchema(form, workflowId);
  }).observe(container, { childList: true });

  container.addEventListener("focusin", (e) => {
    const target = e.target.closest(TARGETS);
    if (!target) return;
    if (target !== control) {
      control = target;
      placeAssist(target);
    }
    schedulePreview(0);
  });
  container.addEventListener("input", (e) => {
    if (e.target !== control) return;
    schedulePreview(PREVIEW_DELAY_MS);
    updateSuggestions();
  });
  // in JSON the expression previewed is the one under the cursor: follow its moves
  const moved = (e) => {
    if (e.target === control && isJson(control)) schedulePreview(PREVIEW_DELAY_MS);
  };
  container.addEventListener("click", moved);
  container.addEventListener("keyup", (e) => {
    if (/^(Arrow|Home|End|Page)/.test(e.key)) moved(e);
  });
  container.addEventListener("keydown", (e) => {
    if (e.target !== control || !assist) return;
    const list = assist.querySelector(".expr-suggest");
    if (list.hidden) return;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      const n = suggestState.items.length;
      suggestState.active = (suggestState.active + (e.key === "ArrowDown" ? 1 : n - 1)) % n;
      drawSuggestions();
    } else if (e.key === "Enter" || e.key === "Tab") {
      // a fast typist can press Enter before the list of what was just typed is drawn:
      // never insert from a list made for an earlier token
      refreshIfStale();
      if (!suggestState.items.length) return;
      e.preventDefault();
      insertPath(suggestState.items[suggestState.active].path, true);
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      list.hidden = true;
    }
  });

  function nodeId() {
    const form = container.querySelector(".config-form");
    return form ? form.dataset.nodeId : null;
  }

  function placeAssist(target) {
    if (!assist || !container.contains(assist)) assist = buildAssist();
    // after a code editor's box, not inside it: its coloured copy covers the whole box
    const anchor = target.closest(".kv-row") || target.closest(".expression-control") || target.closest(".code-editor") || target;
    anchor.after(assist);
    assist.querySelector(".field-picker").hidden = true;
    assist.querySelector(".expr-pick-btn").setAttribute("aria-expanded", "false");
    assist.querySelector(".expr-suggest").hidden = true;
    assist.querySelector(".expr-format-btn").hidden = !isJson(target);
  }

  function buildAssist() {
    const box = el("div", "expr-assist");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Expression editor");
    const suggest = el("ul", "expr-suggest");
    suggest.setAttribute("role", "listbox");
    suggest.setAttribute("aria-label", "Matching fields");
    suggest.hidden = true;
    const bar = el("div", "expr-assist-bar");
    const pick = el("button", "btn btn-small expr-pick-btn", "Fields");
    pick.type = "button";
    pick.title = "Insert a field of the trigger or an upstream step";
    pick.setAttribute("aria-expanded", "false");
    const preview = el("div", "expr-preview");
    preview.setAttribute("aria-live", "polite");
    preview.append(el("span", "expr-preview-label", "Preview"), el("code", "expr-preview-value", ""));
    const format = el("button", "btn btn-small expr-format-btn", "Format");
    format.type = "button";
    format.title = "Indent the JSON";
    format.addEventListener("click", () => {
      const text = control && formatJson(control.value);
      if (text === null || !control) return;
      control.value = text;
      control.dispatchEvent(new Event("input", { bubbles: true }));
    });
    bar.append(pick, format, preview);
    const error = el("p", "expr-error");
    error.setAttribute("role", "alert");
    error.hidden = true;
    const problems = el("ul", "expr-problems");
    const picker = el("div", "field-picker");
    picker.hidden = true;
    box.append(suggest, bar, error, problems, picker);
    // Keep the focus in the expression while clicking the box's buttons.
    box.addEventListener("mousedown", (e) => {
      if (e.target.closest("button")) e.preventDefault();
    });
    pick.addEventListener("click", () => togglePicker());
    return box;
  }

  async function togglePicker() {
    const picker = assist.querySelector(".field-picker");
    const button = assist.querySelector(".expr-pick-btn");
    if (!picker.hidden) {
      picker.hidden = true;
      button.setAttribute("aria-expanded", "false");
      return;
    }
    picker.hidden = false;
    button.setAttribute("aria-expanded", "true");
    picker.textContent = "Loading fields…";
    try {
      const result = await fields.groups(nodeId());
      const search = renderPicker(picker, result, (path) => insertPath(path, false));
      search.focus();
    } catch (err) {
      picker.textContent = `Could not load the fields: ${err.message}`;
    }
  }

  /** Put ``path`` at the cursor of the control (replacing the partial path when completing). */
  function insertPath(path, replaceToken) {
    if (!control) return;
    if (isJson(control)) return insertJsonPath(path, replaceToken);
    let value = control.value;
    let start = control.selectionStart ?? value.length;
    let end = control.selectionEnd ?? value.length;
    if (document.activeElement !== control && !replaceToken) start = end = value.length;
    if (replaceToken) start -= tokenBefore(value, start).length;
    if (!value.startsWith("=")) {
      // A literal becomes an expression: "=" + path (what was typed is kept as text).
      value = value.trim() ? `="${value.replace(/"/g, '\\"')}" & ` : "=";
      start = end = value.length;
    } else if (start === 0) {
      start = end = 1;
    }
    const before = value.slice(0, start);
    const glue = replaceToken || before === "=" || /[\s(&+\-*/,[{:=]$/.test(before) ? "" : " & ";
    control.value = before + glue + path + value.slice(end);
    inserted((before + glue + path).length);
  }

  /** After an insert: the cursor at ``cursor``, the list closed, the panel told. */
  function inserted(cursor) {
    control.focus();
    control.setSelectionRange(cursor, cursor);
    assist.querySelector(".expr-suggest").hidden = true;
    suggestSeq++;
    control.dispatchEvent(new Event("input", { bubbles: true }));
  }

  /** In JSON: into the "=..." string under the cursor, else a new "=path" string there. */
  function insertJsonPath(path, replaceToken) {
    const value = control.value;
    let start = control.selectionStart ?? value.length;
    const end = control.selectionEnd ?? start;
    if (replaceToken) start -= tokenBefore(value, start).length;
    const put = pathInJson(value, start, end, path, replaceToken);
    control.value = put.text;
    inserted(put.cursor);
  }

  async function updateSuggestions() {
    const list = assist && assist.querySelector(".expr-suggest");
    if (!list) return;
    const seq = ++suggestSeq;
    let result;
    try {
      result = await fields.groups(nodeId());
    } catch {
      list.hidden = true;
      return;
    }
    if (seq !== suggestSeq || !control) return; // typed on meanwhile: a newer call draws
    const token = currentToken();
    suggestState = { items: token ? suggestions(result, token) : [], active: 0, token, result };
    drawSuggestions();
  }

  function currentToken() {
    const value = control.value;
    const at = control.selectionStart ?? value.length;
    if (isJson(control)) {
      const string = stringAt(value, at);
      return string && value[string.start + 1] === "=" ? tokenBefore(value, at) : "";
    }
    return value.startsWith("=") ? tokenBefore(value, at) : "";
  }

  function refreshIfStale() {
    const token = currentToken();
    if (token === suggestState.token || !suggestState.result) return;
    suggestState = {
      items: token ? suggestions(suggestState.result, token) : [],
      active: 0,
      token,
      result: suggestState.result,
    };
    drawSuggestions();
  }

  function drawSuggestions() {
    const list = assist.querySelector(".expr-suggest");
    list.replaceChildren();
    suggestState.items.forEach((item, i) => {
      const li = el("li", "expr-suggest-item");
      li.setAttribute("role", "option");
      li.setAttribute("aria-selected", String(i === suggestState.active));
      li.dataset.path = item.path;
      li.append(el("span", "expr-suggest-path", item.path), el("span", "expr-suggest-type", item.type));
      li.addEventListener("mousedown", (e) => {
        e.preventDefault();
        insertPath(item.path, true);
      });
      list.appendChild(li);
    });
    list.hidden = suggestState.items.length === 0;
  }

  function schedulePreview(delay) {
    clearTimeout(previewTimer);
    previewTimer = setTimeout(runPreview, delay);
  }

  async function runPreview() {
    if (!assist || !control || !container.contains(control)) return;
    const valueEl = assist.querySelector(".expr-preview-value");
    const errorEl = assist.querySelector(".expr-error");
    const problems = assist.querySelector(".expr-problems");
    let text = control.value;
    if (isJson(control)) {
      text = jsonExpression(text, valueEl, errorEl, problems);
      if (text === null) return;
    } else if (!text.startsWith("=") || text.trim() === "=") {
      valueEl.textContent = text.startsWith("=") ? "" : "fixed value (start with = for an expression)";
      errorEl.hidden = true;
      problems.replaceChildren();
      assist.dataset.state = "literal";
      return;
    }
    const seq = ++previewSeq;
    assist.dataset.state = "busy";
    let resp;
    try {
      resp = await postJSON(`/api/v1/workflows/${workflowId}/expressions/preview`, {
        diagram: model.toJSON(),
        node_id: nodeId(),
        expression: text,
      });
    } catch (err) {
      if (seq === previewSeq) showError(`Preview failed: ${err.message}`);
      return;
    }
    if (seq !== previewSeq) return;
    if (!resp.ok) return showError(`Preview failed: ${errorMessage(resp)}`);
    const data = resp.data;
    problems.replaceChildren();
    for (const d of data.diagnostics || []) {
      const li = el("li", `expr-problem severity-${d.severity}`, d.message);
      problems.appendChild(li);
    }
    if (data.error) {
      const at = data.error.position;
      const where = at === null || at === undefined ? "" : ` (at character ${at + 1})`;
      showError(`${data.error.message}${where}`);
      valueEl.textContent = "";
      return;
    }
    errorEl.hidden = true;
    const shown = data.value === null || data.value === undefined ? "no value (nothing matched)" : JSON.stringify(data.value);
    valueEl.textContent = shown.length > PREVIEW_CHARS ? `${shown.slice(0, PREVIEW_CHARS)}…` : shown;
    valueEl.title = data.data_from ? `Evaluated on ${data.data_from}` : "No run yet: evaluated on empty data";
    assist.dataset.state = data.value === null || data.value === undefined ? "empty" : "ok";
  }

  /**
   * The "=..." string under the cursor of a JSON control, or null after saying why there
   * is nothing to preview (the JSON does not parse: its error, with line and column, is
   * the field's own, shown once under it by fields.js; or the cursor is elsewhere).
   */
  function jsonExpression(text, valueEl, errorEl, problems) {
    problems.replaceChildren();
    if (jsonError(text)) {
      valueEl.textContent = "No preview until the JSON parses (its error is under the field)";
      errorEl.hidden = true;
      assist.dataset.state = "literal";
      return null;
    }
    const string = stringAt(text, control.selectionStart ?? 0);
    if (string && string.value.startsWith("=") && !string.value.startsWith("==") && string.value.trim() !== "=") {
      return string.value;
    }
    const count = text.trim() ? expressionsIn(JSON.parse(text)).length : 0;
    valueEl.textContent = count
      ? `JSON with ${count} expression${count > 1 ? "s" : ""}: put the cursor in one to preview it`
      : 'JSON value (a string starting with "=" is an expression)';
    errorEl.hidden = true;
    assist.dataset.state = "literal";
    return null;
  }

  function showError(message) {
    const errorEl = assist.querySelector(".expr-error");
    errorEl.textContent = message;
    errorEl.hidden = false;
    assist.dataset.state = "error";
  }
}

/** The partial path just before ``at``: "$trigger.bo", "body.cu", "qt". */
export function tokenBefore(value, at) {
  const match = /[$A-Za-z_][\w$.`]*$|\.$/.exec(value.slice(0, at));
  return match ? match[0] : "";
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}
