// The fields an expression can read, for the expression editor (expression-editor.js):
// fetched from POST /api/v1/workflows/{id}/expressions/fields for the open node (declared
// output schemas upstream, plus the last run's data and the draft's pinned data), shown as
// a searchable, grouped list, and matched against what is typed for autocomplete.

import { errorMessage, postJSON } from "./api.js";

const MAX_SUGGESTIONS = 8;

/** The full JSONata path of a picker entry: "body.qty", "$trigger.body", "$steps.a.total". */
export function fullPath(group, field) {
  return group.prefix ? `${group.prefix}.${field.path}` : field.path;
}

/** Fetches and caches the field groups of one node; refetches when the diagram changed. */
export class FieldSource {
  constructor(workflowId, model) {
    this.workflowId = workflowId;
    this.model = model;
    this.cache = new Map(); // node id -> {stamp, result}
    this.stamp = 0;
    model.onChange((kind) => {
      if (kind === "graph") this.stamp++;
    });
    // pinned data (a fetched test event on the trigger) gives the fields their examples
    document.addEventListener("railyard:pins-changed", () => this.stamp++);
  }

  /** -> {sources: [{prefix, label, fields: [{path, type, description}], examples}], data_from} */
  groups(nodeId) {
    const hit = this.cache.get(nodeId);
    if (hit && hit.stamp === this.stamp) return hit.result;
    const result = postJSON(`/api/v1/workflows/${this.workflowId}/expressions/fields`, {
      diagram: this.model.toJSON(),
      node_id: nodeId,
    }).then((resp) => {
      if (!resp.ok) throw new Error(errorMessage(resp));
      return resp.data;
    });
    // one request for every list asking at once; a failed one is asked again
    this.cache.set(nodeId, { stamp: this.stamp, result });
    result.catch(() => {
      if (this.cache.get(nodeId)?.result === result) this.cache.delete(nodeId);
    });
    return result;
  }
}

const shared = new WeakMap(); // model -> FieldSource

/** The one FieldSource of a designer page (one request per node for every field list). */
export function fieldSource(workflowId, model) {
  if (!shared.has(model)) shared.set(model, new FieldSource(workflowId, model));
  return shared.get(model);
}

/** Paths (with their type) that complete ``token`` (the partial path before the cursor). */
export function suggestions(result, token) {
  if (!token) return [];
  const wanted = token.toLowerCase();
  const found = [];
  for (const group of result.sources || []) {
    if (group.prefix && group.prefix.toLowerCase().startsWith(wanted) && group.prefix !== token) {
      found.push({ path: group.prefix, type: group.label });
    }
    for (const field of group.fields) {
      const path = fullPath(group, field);
      if (path !== token && path.toLowerCase().startsWith(wanted)) found.push({ path, type: field.type });
    }
  }
  const depth = (p) => p.split(".").length;
  found.sort((a, b) => depth(a.path) - depth(b.path) || a.path.localeCompare(b.path));
  return found.slice(0, MAX_SUGGESTIONS);
}

/** Render the picker into ``box``: a search input and grouped buttons; ``onPick(path)``. */
export function renderPicker(box, result, onPick) {
  box.replaceChildren();
  const search = Object.assign(document.createElement("input"), {
    type: "search",
    className: "field-picker-search",
    placeholder: "Search fields",
  });
  search.setAttribute("aria-label", "Search fields");
  const list = document.createElement("div");
  list.className = "field-picker-list";
  box.append(search, list);
  const from = document.createElement("p");
  from.className = "hint field-picker-from";
  from.textContent = result.data_from
    ? `Examples from ${result.data_from}`
    : "No run yet: fields come from the declared schemas";
  box.appendChild(from);

  const draw = () => {
    const needle = search.value.trim().toLowerCase();
    list.replaceChildren();
    for (const group of result.sources || []) {
      const entries = group.fields.filter((f) => !needle || fullPath(group, f).toLowerCase().includes(needle));
      if (!entries.length && needle) continue;
      const section = document.createElement("section");
      section.className = "field-picker-group";
      const head = document.createElement("h4");
      head.textContent = group.label;
      const code = document.createElement("code");
      code.textContent = group.prefix || "$";
      head.append(" ", code);
      section.appendChild(head);
      if (!entries.length) {
        const none = document.createElement("p");
        none.className = "hint";
        none.textContent = "Any value (no schema declared)";
        section.appendChild(none);
      }
      for (const field of entries) {
        const path = fullPath(group, field);
        const button = document.createElement("button");
        button.type = "button";
        button.className = "field-picker-item";
        button.dataset.path = path;
        button.title = field.description || path;
        const name = document.createElement("span");
        name.className = "field-picker-path";
        name.textContent = field.path;
        const type = document.createElement("span");
        type.className = "field-picker-type";
        type.textContent = field.type;
        button.append(name, type);
        const example = (group.examples || {})[field.path];
        if (example !== undefined) {
          const ex = document.createElement("span");
          ex.className = "field-picker-example";
          ex.textContent = example;
          button.appendChild(ex);
        }
        button.addEventListener("click", () => onPick(path));
        section.appendChild(button);
      }
      list.appendChild(section);
    }
  };
  search.addEventListener("input", draw);
  search.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      const first = list.querySelector(".field-picker-item");
      if (first) first.click();
    }
  });
  draw();
  return search;
}
