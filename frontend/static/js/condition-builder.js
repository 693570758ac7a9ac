// The no-code condition builder: rows of "field / operator / value", each group of rows
// joined by "and", groups by "or". Fields are offered from what the condition can read
// (condition-targets.js chooses them: the step input and earlier steps for If and Switch,
// an item's fields for Filter), and the field's type chooses the operators offered (text,
// number, date, yes/no, list, exists). Every change writes the JSONata of the rows
// (condition-rules.js) through the target's write(); the target's text stays visible and
// editable, and handEdit(text) brings the rows back when the text is in the builder's
// subset, else the rows step aside ("written by hand") until it is. A field dragged in
// from a field list (field-drag.js) fills a row's Field box.

import { compile, OPERATOR, OPERATORS, parse } from "./condition-rules.js";

let datalistSeq = 0;
let writing = 0;

/** Whether the builder is writing its own text (a target's listener ignores those events). */
export const builderWriting = () => writing > 0;

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

const KIND_LABEL = { string: "Text", number: "Number", date: "Date", boolean: "Yes / no", list: "List", any: "Any" };

/**
 * A builder box for one condition.
 *
 * o.title: the box's heading; o.text: the current JSONata (a leading "=" is ignored);
 * o.write(text): stores the rows' JSONata ("" when no row has a field); o.fields: a
 * Promise of [{path, type (operator type), label}] offered in the Field boxes; o.locked:
 * read only. Returns {box, handEdit(text)}.
 */
export function conditionBox(o) {
  const { locked } = o;
  const listId = `cond-fields-${++datalistSeq}`;
  const types = new Map(); // field path -> operator type
  const datalist = el("datalist", { id: listId });
  const box = el("div", { className: "cond-builder" });
  const groupsEl = el("div", { className: "cond-groups" });
  const note = el("p", { className: "hint cond-note", hidden: true });
  const addGroup = el("button", { type: "button", className: "btn btn-small cond-add-group", textContent: "+ Or group", disabled: locked });
  box.append(el("div", { className: "cond-title", textContent: o.title || "Conditions" }), groupsEl, addGroup, note, datalist);
  let state = parse(o.text) || null;
  let stale = false; // the field types arrived while the user was typing in a row

  o.fields.then((fields) => {
    for (const f of fields) {
      types.set(f.path, f.type);
      datalist.append(el("option", { value: f.path, label: f.label }));
    }
    // a render replaces the rows' inputs: never under the user's caret (the text typed
    // so far would be lost); the rows are rendered when the caret leaves them
    if (groupsEl.contains(document.activeElement)) stale = true;
    else render();
  }).catch(() => {}); // no field list: fields are typed
  groupsEl.addEventListener("focusout", (event) => {
    if (stale && !groupsEl.contains(event.relatedTarget)) render();
  });

  function write() {
    if (locked) return;
    writing++;
    try {
      o.write(compile(state));
    } finally {
      writing--;
    }
  }

  function operatorSelect(row) {
    const type = types.get(row.field);
    const select = el("select", { className: "cond-op", disabled: locked });
    select.setAttribute("aria-label", "Operator");
    const offered = OPERATORS.filter((op) => !type || type === "any" || op.type === type || op.type === "any" || op.id === row.op);
    for (const kind of Object.keys(KIND_LABEL)) {
      const ops = offered.filter((op) => op.type === kind);
      if (!ops.length) continue;
      const group = el("optgroup", { label: KIND_LABEL[kind] });
      for (const op of ops) group.append(el("option", { value: op.id, textContent: op.label, selected: op.id === row.op }));
      select.append(group);
    }
    return select;
  }

  /** Set a row's field (typed, picked or dropped): a field of another type gets its type's first operator. */
  function setField(row, path) {
    row.field = path.trim();
    const type = types.get(row.field);
    const current = OPERATOR.get(row.op)?.type;
    if (type && type !== "any" && current !== type && current !== "any") {
      row.op = OPERATORS.find((op) => op.type === type).id;
    }
    write();
    render();
  }

  function rowEl(row, g, r) {
    const field = el("input", { type: "text", className: "cond-field mono", value: row.field, placeholder: "field, e.g. body.total", disabled: locked });
    field.setAttribute("list", listId);
    field.setAttribute("aria-label", "Field");
    field.dataset.dropField = "path"; // field-drag.js: a dropped field sets the path
    const op = operatorSelect(row);
    const value = el("input", { type: "text", className: "cond-value", value: row.value, placeholder: "value", disabled: locked });
    value.setAttribute("aria-label", "Value");
    value.hidden = Boolean(OPERATOR.get(row.op)?.unary);
    const remove = el("button", { type: "button", className: "icon-btn cond-remove", textContent: "×", title: "Remove this condition", disabled: locked });
    remove.setAttribute("aria-label", "Remove this condition");
    field.addEventListener("change", () => setField(row, field.value));
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
    stale = false;
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
  render();
  return {
    box,
    handEdit(text) {
      if (writing) return;
      state = parse(text);
      render();
    },
  };
}
