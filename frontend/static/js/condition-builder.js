// The no-code condition builder above a condition field (If's Condition): rows of
// "field / operator / value", each group of rows joined by "and", groups by "or". Fields
// are picked from what the step can read (field-picker.js: the input, the trigger, earlier
// steps, with their types), and the field's type chooses the operators offered (text,
// number, date, yes/no, list, exists). Every change writes the JSONata of the rows
// (condition-rules.js) into the condition field, which stays visible and editable; typing
// there brings the rows back when the text is in the builder's subset, else the rows step
// aside ("written by hand") until it is. panel.js reads the field as for any edit.

import { compile, OPERATOR, OPERATORS, parse, typeOf } from "./condition-rules.js";
import { FieldSource, fullPath } from "./field-picker.js";

/** Node types whose field gets a builder: type -> field name. */
const BUILDER_FIELDS = { "control.if": "condition" };
let datalistSeq = 0;

export function attachConditionBuilder(container, model, workflowId) {
  const fields = new FieldSource(workflowId, model);
  container.addEventListener("config-panel:rendered", (e) => {
    const form = e.detail?.form;
    const name = form && BUILDER_FIELDS[form.dataset.nodeType];
    const wrap = name && form.querySelector(`[data-field-wrap="${name}"]`);
    if (wrap) mount(wrap, name, form, fields, e.detail.nodeId);
  });
}

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

function mount(wrap, name, form, fields, nodeId) {
  const live = () => form.querySelector(`[data-field="${name}"]`);
  const locked = form.classList.contains("read-only");
  const listId = `cond-fields-${++datalistSeq}`;
  const types = new Map(); // field path -> operator type
  const datalist = el("datalist", { id: listId });
  const box = el("div", { className: "cond-builder" });
  const groupsEl = el("div", { className: "cond-groups" });
  const note = el("p", { className: "hint cond-note", hidden: true });
  const addGroup = el("button", { type: "button", className: "btn btn-small cond-add-group", textContent: "+ Or group", disabled: locked });
  box.append(el("div", { className: "cond-title", textContent: "Conditions" }), groupsEl, addGroup, note, datalist);
  // full width, between the field's title row and its text box
  const control = wrap.querySelector(".literal-control, .expression-control");
  if (control) control.before(box);
  else wrap.append(box);
  let state = parse(live()?.value) || null;
  let writing = false; // the builder's own input event: not a hand edit

  fields.groups(nodeId).then((result) => {
    for (const group of result.sources || []) {
      for (const field of group.fields || []) {
        const path = fullPath(group, field);
        types.set(path, typeOf(field.type));
        datalist.append(el("option", { value: path, label: `${field.type || ""} · ${group.label}` }));
      }
    }
    render();
  }).catch(() => {}); // no field list: fields are typed

  function write() {
    const control = live();
    if (!control || locked) return;
    const text = compile(state);
    const expr = control.classList.contains("expr-input");
    control.value = expr && text ? `=${text}` : text;
    writing = true;
    try {
      control.dispatchEvent(new Event("input", { bubbles: true }));
    } finally {
      writing = false;
    }
  }

  function operatorSelect(row) {
    const type = types.get(row.field);
    const select = el("select", { className: "cond-op", disabled: locked });
    select.setAttribute("aria-label", "Operator");
    const offered = OPERATORS.filter((o) => !type || type === "any" || o.type === type || o.type === "any" || o.id === row.op);
    for (const kind of ["string", "number", "date", "boolean", "list", "any"]) {
      const ops = offered.filter((o) => o.type === kind);
      if (!ops.length) continue;
      const label = { string: "Text", number: "Number", date: "Date", boolean: "Yes / no", list: "List", any: "Any" }[kind];
      const group = el("optgroup", { label });
      for (const o of ops) group.append(el("option", { value: o.id, textContent: o.label, selected: o.id === row.op }));
      select.append(group);
    }
    return select;
  }

  function rowEl(row, g, r) {
    const field = el("input", { type: "text", className: "cond-field mono", value: row.field, placeholder: "field, e.g. body.total", disabled: locked });
    field.setAttribute("list", listId);
    field.setAttribute("aria-label", "Field");
    const op = operatorSelect(row);
    const value = el("input", { type: "text", className: "cond-value", value: row.value, placeholder: "value", disabled: locked });
    value.setAttribute("aria-label", "Value");
    value.hidden = Boolean(OPERATOR.get(row.op)?.unary);
    const remove = el("button", { type: "button", className: "icon-btn cond-remove", textContent: "×", title: "Remove this condition", disabled: locked });
    remove.setAttribute("aria-label", "Remove this condition");
    field.addEventListener("change", () => {
      row.field = field.value.trim();
      const type = types.get(row.field);
      // a field of another type: its type's first operator
      if (type && type !== "any" && OPERATOR.get(row.op)?.type !== type && OPERATOR.get(row.op)?.type !== "any") {
        row.op = OPERATORS.find((o) => o.type === type).id;
      }
      write();
      render();
    });
    op.addEventListener("change", () => {
      row.op = op.value;
      write();
      render();
    });
    value.addEventListener("input", () => {
      row.value = value.value;
      write();
    });
    remove.addEventListener("click", () => {
      state.groups[g].splice(r, 1);
      if (!state.groups[g].length) state.groups.splice(g, 1);
      if (!state.groups.length) state.groups.push([{ field: "", op: "eq", value: "" }]);
      write();
      render();
    });
    return el("div", { className: "cond-row" }, el("span", { className: "cond-join", textContent: r ? "and" : "if" }), field, op, value, remove);
  }

  function render() {
    groupsEl.replaceChildren();
    note.hidden = Boolean(state);
    groupsEl.hidden = addGroup.hidden = !state;
    if (!state) {
      note.textContent = "Written by hand: edit it below (rows come back when it is a set of simple comparisons).";
      return;
    }
    state.groups.forEach((rows, g) => {
      if (g) groupsEl.append(el("div", { className: "cond-or", textContent: "or" }));
      const groupEl = el("div", { className: "cond-group" });
      rows.forEach((row, r) => groupEl.append(rowEl(row, g, r)));
      const add = el("button", { type: "button", className: "btn btn-small cond-add", textContent: "+ And", disabled: locked });
      add.addEventListener("click", () => {
        rows.push({ field: "", op: "eq", value: "" });
        render();
        groupEl.querySelectorAll(".cond-field")[rows.length - 1]?.focus();
      });
      groupEl.append(add);
      groupsEl.append(groupEl);
    });
  }

  addGroup.addEventListener("click", () => {
    state.groups.push([{ field: "", op: "eq", value: "" }]);
    render();
  });
  // typed by hand: rows back when the text is the builder's
  wrap.addEventListener("input", (e) => {
    if (!writing && e.target === live() && !box.contains(e.target)) {
      state = parse(e.target.value);
      render();
    }
  });
  render();
}
