// The three ways the step data view shows a value (docs/designer.md, "Step data view"):
// a table, the JSON text and its schema (each field with its type). Fields carry the
// expression path that reads them (`body.customer.email`, a key that is not a name in
// backticks); on the input side they are drag sources (data-drag-path, field-drag.js).
// DOM building only: no requests.

const MAX_ROWS = 100; // rows a table draws; the JSON view has the rest
const MAX_ITEMS_SAMPLED = 20; // list items whose fields make a list's schema

/** The expression path of ``key`` under ``parent`` ("" at the top). */
export function childPath(parent, key) {
  const part = /^[A-Za-z_$][\w$]*$/.test(key) ? key : `\`${key.replace(/`/g, "")}\``;
  return parent ? `${parent}.${part}` : part;
}

/** "string" | "number" | "boolean" | "null" | "object" | "list". */
export function typeOf(value) {
  if (value === null || value === undefined) return "null";
  if (Array.isArray(value)) return "list";
  return typeof value === "object" ? "object" : typeof value;
}

/** An element: attributes (``text`` sets its text; null, undefined and false are left out) and children. */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

/** A field name, draggable when ``draggable`` (the input side). */
function fieldName(tag, path, label, draggable) {
  const attrs = { class: "data-field mono", text: label, title: path };
  if (draggable) Object.assign(attrs, { draggable: "true", tabindex: "0", "data-drag-path": path, title: `${path}: drag onto a setting, or press Enter, to map it into the setting focused last` });
  return el(tag, attrs);
}

function cellText(value) {
  if (value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/**
 * The table view: a list of objects as one row per item and one column per field; an
 * object as one row per field (Field, Value); anything else as its text.
 */
export function tableView(value, draggable) {
  const table = el("table", { class: "data-table" });
  if (Array.isArray(value) && value.length && value.every((v) => typeOf(v) === "object")) {
    const columns = [...new Set(value.slice(0, MAX_ROWS).flatMap((v) => Object.keys(v)))];
    const head = el("tr", {}, el("th", { scope: "col", text: "#" }));
    for (const c of columns) head.append(fieldName("th", childPath("", c), c, draggable));
    for (const th of head.querySelectorAll("th.data-field")) th.setAttribute("scope", "col");
    table.append(el("thead", {}, head));
    const body = el("tbody");
    value.slice(0, MAX_ROWS).forEach((row, i) => {
      const tr = el("tr", {}, el("td", { class: "muted", text: String(i) }));
      for (const c of columns) tr.append(el("td", { text: cellText(row[c]) }));
      body.append(tr);
    });
    table.append(body);
    if (value.length > MAX_ROWS) table.append(el("caption", { text: `First ${MAX_ROWS} of ${value.length} items (the JSON view has them all)` }));
    return table;
  }
  if (typeOf(value) === "object" && Object.keys(value).length) {
    table.append(el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Field" }), el("th", { scope: "col", text: "Value" }))));
    const body = el("tbody");
    for (const [k, v] of Object.entries(value)) {
      const name = fieldName("th", childPath("", k), k, draggable);
      name.setAttribute("scope", "row");
      body.append(el("tr", {}, name, el("td", { text: cellText(v) })));
    }
    table.append(body);
    return table;
  }
  return el("p", { class: "muted small", text: value === undefined || value === null ? "No data" : cellText(value) });
}

/** The JSON view: the value as indented text. */
export function jsonView(value) {
  return el("pre", { class: "json mono small data-json", tabindex: "0", text: JSON.stringify(value ?? null, null, 2) });
}

/**
 * The schema view: every field as a nested list of name and type (a list's fields are
 * those of its first items; their paths read the field of every item, as JSONata does).
 */
export function schemaView(value, draggable) {
  const list = schemaList(value, "", draggable);
  return list || el("p", { class: "muted small", text: `No fields: the data is ${typeOf(value)}` });
}

function schemaList(value, parent, draggable) {
  let fields = null;
  if (typeOf(value) === "object") fields = Object.entries(value);
  else if (Array.isArray(value)) {
    const merged = {};
    for (const item of value.slice(0, MAX_ITEMS_SAMPLED)) if (typeOf(item) === "object") Object.assign(merged, item);
    fields = Object.entries(merged);
  }
  if (!fields || !fields.length) return null;
  const ul = el("ul", { class: "data-schema" });
  for (const [k, v] of fields) {
    const path = childPath(parent, k);
    const type = Array.isArray(v) && v.length ? `list of ${typeOf(v[0])}` : typeOf(v);
    const li = el("li", {}, fieldName("span", path, k, draggable), " ", el("span", { class: "data-type", text: type }));
    const inner = schemaList(v, path, draggable);
    if (inner) li.append(inner);
    ul.append(li);
  }
  return ul;
}

/** Where ``path`` splits into its parent and last name (the last "." outside backticks), or -1. */
function lastDot(path) {
  let quoted = false;
  let at = -1;
  for (let i = 0; i < path.length; i++) {
    if (path[i] === "`") quoted = !quoted;
    else if (path[i] === "." && !quoted) at = i;
  }
  return at;
}

/**
 * The fields known without data: ``fields`` as the field picker lists them ([{path, type}],
 * parents before their fields), nested like the schema view, each with its type and, where
 * the sample data had one, an example (``examples`` by path).
 */
export function fieldsView(fields, examples, draggable) {
  const top = el("ul", { class: "data-schema" });
  const lists = new Map(); // path -> {li, inner} of a field drawn
  for (const field of fields) {
    const cut = lastDot(field.path);
    const parent = cut < 0 ? null : lists.get(field.path.slice(0, cut));
    const name = parent ? field.path.slice(cut + 1) : field.path;
    const li = el("li", {}, fieldName("span", field.path, name, draggable), " ", el("span", { class: "data-type", text: field.type }));
    const example = examples?.[field.path];
    if (example !== undefined) li.append(" ", el("span", { class: "data-example muted", text: `e.g. ${example}` }));
    if (parent) {
      if (!parent.inner.isConnected) parent.li.append(parent.inner);
      parent.inner.append(li);
    } else top.append(li);
    lists.set(field.path, { li, inner: el("ul", { class: "data-schema" }) });
  }
  return top;
}
