// Where the condition builder (condition-builder.js) sits in a node's settings, and what
// it reads and writes there:
//
// - If: one builder over the Condition field, offering the fields the step can read.
// - Switch: one builder per case over that case's rule (the Rules table's row named after
//   the case, stored as "=<JSONata>"; a row is added when a case gets its first condition
//   and removed when its last one goes); the builders follow the Cases list. With Rules as
//   one expression (fx) they step aside.
// - Filter: one builder over "Keep items where", a condition read on each item, offering
//   the fields of an item of the list it filters (Items, or the step input).

import { builderWriting, conditionBox } from "./condition-builder.js";
import { typeOf } from "./condition-rules.js";
import { kvRow } from "./fields.js";
import { fieldSource, fullPath } from "./field-picker.js";

export function attachConditionBuilder(container, model, workflowId) {
  const source = fieldSource(workflowId, model);
  let current = null; // the open panel's redraw on model changes
  model.onChange((kind) => {
    if (kind === "graph" && current) current();
  });
  container.addEventListener("config-panel:rendered", (e) => {
    current = null;
    const form = e.detail?.form;
    const mount = form && TARGETS[form.dataset.nodeType];
    if (!mount) return;
    const nodeId = e.detail.nodeId;
    const ctx = { form, nodeId, model, locked: form.classList.contains("read-only"), source };
    current = mount(ctx) || null;
  });
}

const TARGETS = { "control.if": mountIf, "control.switch": mountSwitch, "data.filter": mountFilter };

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

/** [{path, type, label}] of every field the node can read (the picker's groups). */
async function readableFields(source, nodeId) {
  const result = await source.groups(nodeId);
  return (result.sources || []).flatMap((group) =>
    (group.fields || []).map((f) => ({ path: fullPath(group, f), type: typeOf(f.type), label: `${f.type || ""} · ${group.label}` })),
  );
}

/** Put the builder box between a field's title row and its text box. */
function place(wrap, box) {
  const control = wrap.querySelector(".literal-control, .expression-control");
  if (control) control.before(box);
  else wrap.append(box);
}

/** Write ``text`` into a text control as a user would (panel.js reads it back). */
function typeInto(control, text) {
  control.value = text;
  control.dispatchEvent(new Event("input", { bubbles: true }));
}

function mountIf({ form, nodeId, locked, source }) {
  const wrap = form.querySelector('[data-field-wrap="condition"]');
  if (!wrap) return;
  const live = () => form.querySelector('[data-field="condition"]');
  const builder = conditionBox({
    title: "Conditions",
    text: live()?.value,
    fields: readableFields(source, nodeId),
    locked,
    write(text) {
      const control = live();
      if (control) typeInto(control, control.classList.contains("expr-input") && text ? `=${text}` : text);
    },
  });
  place(wrap, builder.box);
  wrap.addEventListener("input", (e) => {
    if (!builderWriting() && e.target === live()) builder.handEdit(e.target.value);
  });
}

function mountSwitch({ form, nodeId, model, locked, source }) {
  const wrap = form.querySelector('[data-field-wrap="rules"]');
  if (!wrap) return;
  const host = el("div", { className: "cond-cases" });
  place(wrap, host);
  const fields = readableFields(source, nodeId);
  const builders = new Map(); // case -> builder
  const rowOf = (name) => [...wrap.querySelectorAll(".literal-control .kv-row")].find((r) => r.querySelector(".kv-key").value.trim() === name);

  function writeRule(name, text) {
    let row = rowOf(name);
    if (!text) {
      if (!row) return;
      const rows = row.parentElement;
      row.remove();
      rows.dispatchEvent(new Event("change", { bubbles: true }));
      return;
    }
    if (!row) {
      row = kvRow();
      row.querySelector(".kv-key").value = name;
      wrap.querySelector(".literal-control .kv-rows").append(row);
    }
    typeInto(row.querySelector(".kv-value"), `=${text}`);
  }

  let shown = null;
  function draw() {
    if (!host.isConnected) return;
    const cases = (model.node(nodeId)?.config.cases || []).filter((c) => typeof c === "string" && c);
    const asExpression = wrap.classList.contains("expr-mode");
    const key = JSON.stringify([cases, asExpression]);
    if (key === shown) return;
    shown = key;
    host.replaceChildren();
    builders.clear();
    if (asExpression || !cases.length) {
      const text = asExpression
        ? "Rules are one expression: switch fx off to give each case its own conditions."
        : "Add cases above: each gets its own conditions here.";
      host.append(el("p", { className: "hint cond-note", textContent: text }));
      return;
    }
    for (const name of cases) {
      const builder = conditionBox({
        title: `Case “${name}”`,
        text: rowOf(name)?.querySelector(".kv-value").value || "",
        fields,
        locked,
        write: (text) => writeRule(name, text),
      });
      builder.box.dataset.case = name;
      builders.set(name, builder);
      host.append(builder.box);
    }
  }
  // a rule typed into the table by hand: its case's rows follow
  wrap.addEventListener("input", (e) => {
    const row = !builderWriting() && e.target.closest(".kv-row");
    if (row) builders.get(row.querySelector(".kv-key").value.trim())?.handEdit(row.querySelector(".kv-value").value);
  });
  draw();
  return draw;
}

/**
 * The dotted path of the list a Filter works on, within the picker's paths: Items when it
 * is a plain path expression, else the input's "items" list when it has one (what list
 * nodes output), else the input itself (""); null when Items is another expression.
 */
function listPath(items, fields) {
  if (typeof items === "string" && items.startsWith("=")) {
    const path = items.slice(1).trim();
    return /^\$?[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/.test(path) ? path : null;
  }
  if (items !== undefined && items !== null) return null;
  return fields.some((f) => f.path === "items" && f.type === "list") ? "items" : "";
}

/** The fields of one item of the Filter's list (paths relative to the item). */
async function itemFields(source, nodeId, items) {
  const all = await readableFields(source, nodeId);
  const base = listPath(items, all);
  if (base === null) return [];
  if (base === "") return all.filter((f) => !f.path.startsWith("$"));
  const prefix = `${base}.`;
  return all.filter((f) => f.path.startsWith(prefix)).map((f) => ({ ...f, path: f.path.slice(prefix.length) }));
}

function mountFilter({ form, nodeId, model, locked, source }) {
  const wrap = form.querySelector('[data-field-wrap="condition"]');
  const control = wrap?.querySelector('[data-field="condition"]');
  if (!control) return;
  let builder = null;
  let shown;
  // the item fields follow Items (mapped by hand or by a dropped field)
  function draw() {
    if (!control.isConnected) return;
    const items = model.node(nodeId)?.config.items;
    if (builder && items === shown) return;
    shown = items;
    const next = conditionBox({
      title: "Keep the items where",
      text: control.value,
      fields: itemFields(source, nodeId, items),
      locked,
      write: (text) => typeInto(control, text),
    });
    if (builder) builder.box.replaceWith(next.box);
    else place(wrap, next.box);
    builder = next;
  }
  control.addEventListener("input", () => builder.handEdit(control.value));
  draw();
  return draw;
}
