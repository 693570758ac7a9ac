// Mapping by dragging: the "Input fields" strip at the top of a step's settings (the
// fields of the step's input, with their types and, after a run or with pinned data,
// examples; it stays in view while the settings scroll and folds away) is a drag source; a field dropped
//
// - on a condition builder row's Field box sets that row's field;
// - on a setting that takes an expression switches it to one and maps it (`=path`), or
//   adds the path to it when it already holds one (where it is dropped, in its text box);
//   on a JSON value with content it goes in (json-text.js: into the "=..." string where it
//   is dropped, else as a new member of an object named after the field, or a list's item);
// - on a table value of such a setting (Set's fields, headers) does the same per value;
// - on any other text box inserts the path as text (the browser's own drop).
//
// The step data view's input side (data-view.js) is a drag source too.
//
// From the keyboard: every field to drag is focusable; Enter (or Space) on it maps it into
// the setting last typed in or clicked (the same rules as a drop at its caret), or, when
// none was, the setting focused last; the focus goes to that setting. Settings the focus
// only passed through on its way to the field (Shift+Tab through the form) are not
// targets. To map into an empty setting from the keyboard, use its "{}" picker. The picker (the "{}" button of every expression) does the
// same from the setting's side.

import { fieldSource, fullPath } from "./field-picker.js";
import { mapIntoJson } from "./json-text.js";

const MIME = "application/x-railyard-field";
const MAX_FIELDS = 40;
const CLOSED_KEY = "railyard.designer.input-fields-closed"; // folded away, per browser

let lastSetting = null; // the setting (a drop target) last typed in or clicked
let lastFocused = null; // the setting focused last (the target while none was typed in)

/** The setting a keyboard mapping goes into (see the module comment), or null. */
function keyboardTarget() {
  const setting = [lastSetting, lastFocused].find((el) => el?.isConnected && dropTarget(el));
  return setting ? dropTarget(setting) : null;
}

export function attachFieldDrag(container, model, workflowId) {
  const source = fieldSource(workflowId, model);
  container.addEventListener("focusin", (e) => {
    if (dropTarget(e.target)) lastFocused = e.target;
  });
  container.addEventListener("input", (e) => {
    if (dropTarget(e.target)) lastSetting = e.target;
  });
  container.addEventListener("pointerdown", (e) => {
    if (dropTarget(e.target)) lastSetting = e.target;
  });
  container.addEventListener("config-panel:rendered", (e) => {
    const form = e.detail?.form;
    if (form && !form.classList.contains("read-only")) showInputFields(form, source, e.detail.nodeId);
  });
  dragFieldsFrom(container);
  container.addEventListener("dragover", (e) => {
    if (!e.dataTransfer.types.includes(MIME) || !dropTarget(e.target)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = "copy";
  });
  container.addEventListener("drop", (e) => {
    const path = e.dataTransfer.getData(MIME);
    const target = path && dropTarget(e.target);
    if (target && drop(target, path, e)) e.preventDefault();
  });
}

/**
 * Make every ``[data-drag-path]`` element inside ``container`` a field to drag onto the
 * settings (the Input fields strip, the step data view's input side).
 */
export function dragFieldsFrom(container) {
  container.addEventListener("keydown", (e) => {
    const item = e.target.closest?.("[data-drag-path]");
    if (!item || (e.key !== "Enter" && e.key !== " ") || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    e.stopPropagation();
    const target = keyboardTarget();
    const done = target && drop(target, item.dataset.dragPath, null, true);
    announce(container, done ? `Mapped ${item.dataset.dragPath}` : "Focus a setting first, then press Enter on a field to map it there");
  });
  container.addEventListener("dragstart", (e) => {
    const item = e.target.closest?.("[data-drag-path]");
    if (!item) return;
    const path = item.dataset.dragPath;
    e.dataTransfer.setData(MIME, path);
    e.dataTransfer.setData("text/plain", path);
    e.dataTransfer.effectAllowed = "copy";
  });
}

/** What a drop on ``node`` maps: {kind: "row"|"value"|"field"|"text", control | wrap, fx, node} or null. */
function dropTarget(node) {
  const form = node.closest?.(".config-form");
  if (!form || form.classList.contains("read-only")) return null;
  if (node.matches("input[data-drop-field]")) return { kind: "row", control: node };
  const wrap = node.closest(".field[data-field-wrap]");
  const fx = wrap && [...wrap.querySelectorAll(".fx-toggle")].find((b) => b.closest(".field") === wrap);
  if (fx && node.matches(".kv-value") && !wrap.classList.contains("expr-mode")) return { kind: "value", control: node };
  if (fx) return { kind: "field", wrap, fx, node };
  if (node.matches("input[type=text], textarea")) return { kind: "text", control: node };
  return null;
}

function typed(control, text, event = "input") {
  control.value = text;
  control.dispatchEvent(new Event(event, { bubbles: true }));
  control.focus();
}

/** What a keyboard mapping did, for screen readers (a polite live region of ``container``). */
function announce(container, text) {
  let region = container.querySelector(":scope > .field-map-status");
  if (!region) {
    region = Object.assign(document.createElement("p"), { className: "field-map-status sr-only" });
    region.setAttribute("role", "status");
    container.append(region);
  }
  region.textContent = text;
}

/** The text offset under the drop point in ``control`` (its caret without a pointer event). */
function dropOffset(control, event) {
  const at = event && document.caretPositionFromPoint?.(event.clientX, event.clientY);
  return at && at.offsetNode === control ? at.offset : control.selectionEnd ?? control.value.length;
}

/** Map ``path`` onto ``target``; false leaves the drop to the browser (text inserted).
 * ``byKey``: from the keyboard, where no browser drop follows: text goes in at the caret. */
function drop(target, path, event, byKey = false) {
  if (target.kind === "row") {
    typed(target.control, path, "change");
    return true;
  }
  if (target.kind === "value") {
    if (target.control.value.startsWith("=") && target.control.value.trim() !== "=") return byKey && atCaret(target.control, path);
    typed(target.control, `=${path}`);
    return true;
  }
  if (target.kind === "field") {
    const expr = target.wrap.querySelector(".expression-control .expr-input");
    if (!expr) return false;
    const text = target.wrap.classList.contains("expr-mode") ? expr.value.trim() : "";
    if (text && text !== "=") {
      if (target.node === expr) return byKey && atCaret(expr, path); // a drop: the browser puts it there
      typed(expr, `${text} ${path}`);
      return true;
    }
    const literal = target.wrap.querySelector('.literal-control [data-field][data-kind="json"]');
    if (literal && literal.value.trim()) {
      // a JSON value with content keeps it: the field goes in (json-text.js)
      typed(literal, mapIntoJson(literal.value, dropOffset(literal, event), path));
      return true;
    }
    if (!target.wrap.classList.contains("expr-mode")) target.fx.click(); // to an expression
    typed(expr, `=${path}`);
    return true;
  }
  return byKey && target.kind === "text" && atCaret(target.control, path);
}

/** Insert ``path`` at the caret of ``control`` (as the browser's drop of text does). */
function atCaret(control, path) {
  const at = control.selectionStart ?? control.value.length;
  const end = control.selectionEnd ?? at;
  typed(control, control.value.slice(0, at) + path + control.value.slice(end));
  control.setSelectionRange?.(at + path.length, at + path.length);
  return true;
}

/** The strip of the step's input fields (nothing for a trigger or a step without input). */
async function showInputFields(form, source, nodeId) {
  let result;
  try {
    result = await source.groups(nodeId);
  } catch {
    return; // no field list: the picker says why
  }
  if (!form.isConnected) return;
  const input = (result.sources || []).find((g) => g.prefix === "");
  const fields = (input?.fields || []).slice(0, MAX_FIELDS);
  if (!fields.length) return;
  const section = document.createElement("details");
  section.className = "drag-fields";
  section.open = localStorage.getItem(CLOSED_KEY) !== "1";
  section.addEventListener("toggle", () => localStorage.setItem(CLOSED_KEY, section.open ? "0" : "1"));
  const head = document.createElement("summary");
  head.className = "drag-fields-head";
  head.textContent = "Input fields: drag one onto a setting or a condition to map it";
  const list = document.createElement("ul");
  list.className = "drag-fields-list";
  for (const field of fields) {
    const path = fullPath(input, field);
    const item = document.createElement("li");
    item.className = "drag-field";
    item.draggable = true;
    item.tabIndex = 0;
    item.dataset.dragPath = path;
    const example = (input.examples || {})[field.path];
    item.title = example === undefined ? `${path} (${field.type})` : `${path} (${field.type}), e.g. ${example}`;
    const name = document.createElement("span");
    name.className = "mono";
    name.textContent = path;
    const type = document.createElement("span");
    type.className = "drag-field-type";
    type.textContent = field.type;
    item.append(name, type);
    list.append(item);
  }
  section.append(head, list);
  const anchor = form.querySelector(".node-errors");
  if (anchor) anchor.after(section);
  else form.prepend(section);
}
