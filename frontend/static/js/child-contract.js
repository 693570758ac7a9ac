// What a call step's child runs receive (For each, Sub-workflow), shown in its settings:
// the JSON Schema the server infers from the diagram (the child_input of POST
// /api/workflows/{id}/expressions/fields, designer_schema/dataflow.py), as a list of
// fields with their types, e.g. item.sku (string), index (integer), input.body (object),
// and "Copy as input schema": the schema for the called workflow's Manual trigger (its
// Input schema), where expressions reading fields it lacks are errors that block publishing.
// A workflow whose Manual trigger declares no Input schema is typed by what its callers
// send (the inferred_input of the same answer, backend/services/workflows/child_contracts.py): its
// trigger's settings list those fields and where they came from ("from the For each
// “Each order” in All orders").

import { fieldSource } from "./field-picker.js";

const MAX_DEPTH = 3;
const MAX_ROWS = 40;

/** [[path, type]] of a schema's fields, depth first ("" path: the value itself). */
export function schemaFields(schema, path = "", depth = 0, out = []) {
  if (out.length >= MAX_ROWS) return out;
  const types = [].concat(schema?.type || []).join(" | ") || "any";
  if (path) out.push([path, schema?.type === "array" && schema.items?.type ? `list of ${[].concat(schema.items.type).join(" | ")}` : types]);
  const properties = schema?.properties;
  if (properties && depth < MAX_DEPTH) {
    for (const [key, sub] of Object.entries(properties)) schemaFields(sub, path ? `${path}.${key}` : key, depth + 1, out);
  } else if (!path) {
    out.push(["(the whole input)", types]);
  }
  return out;
}

export function attachChildContract(container, model, workflowId) {
  const fields = fieldSource(workflowId, model);
  container.addEventListener("config-panel:rendered", async (e) => {
    const form = e.detail?.form;
    const node = form && model.node(e.detail.nodeId);
    if (node && model.spec(node.type)?.output_schema?.["x-schema-from"]) {
      inferredSection(form, node, fields);
      return;
    }
    if (!node || !model.spec(node.type)?.config_schema?.["x-child-input"]) return;
    let result;
    try {
      result = await fields.groups(node.id);
    } catch {
      return; // the panel works without it
    }
    if (!result.child_input || !form.isConnected) return;
    const box = document.createElement("section");
    box.className = "child-contract";
    const title = document.createElement("h3");
    title.textContent = node.type === "control.foreach" ? "Each child run receives" : "The child run receives";
    const list = fieldList(result.child_input);
    const hint = document.createElement("p");
    hint.className = "hint";
    hint.textContent = "Its trigger's input, inferred from this workflow: read these fields in the called workflow. "
      + "Paste the schema into its Manual trigger's Input schema to have its expressions checked against it.";
    box.append(title, list, hint, copyButton(JSON.stringify(result.child_input, null, 2)));
    (form.querySelector(".panel-description") || form.querySelector("h2"))?.after(box);
  });
}

function fieldList(schema) {
  const list = document.createElement("dl");
  for (const [path, type] of schemaFields(schema)) {
    const dt = Object.assign(document.createElement("dt"), { className: "mono", textContent: path });
    list.append(dt, Object.assign(document.createElement("dd"), { textContent: type }));
  }
  return list;
}

/** "Where this input comes from" line of one caller: the step kind, its label, the workflow. */
export function callerText(caller) {
  const where = caller.workflow === null ? "a workflow you cannot open" : caller.workflow;
  return `from the ${caller.kind} “${caller.step}” in ${where}`;
}

/** A trigger declaring no input schema: the shape its callers send, and who they are. */
async function inferredSection(form, node, fields) {
  let result;
  try {
    result = await fields.groups(node.id);
  } catch {
    return;
  }
  const inferred = result.inferred_input;
  if (!inferred || !form.isConnected) return;
  const box = document.createElement("section");
  box.className = "child-contract inferred-input";
  const title = Object.assign(document.createElement("h3"), { textContent: "Input inferred from its callers" });
  const from = document.createElement("ul");
  from.className = "inferred-from small";
  for (const caller of inferred.callers) {
    const item = document.createElement("li");
    if (caller.workflow === null) {
      item.textContent = callerText(caller);
    } else {
      const link = Object.assign(document.createElement("a"), { href: `/workflows/${caller.workflow_id}/designer`, textContent: callerText(caller) });
      item.append(link);
    }
    from.append(item);
  }
  const hint = Object.assign(document.createElement("p"), {
    className: "hint",
    textContent: "No Input schema is declared, so expressions here are checked against what the calling steps send. "
      + "Paste a schema into Input schema to declare it instead.",
  });
  box.append(title, from, fieldList(inferred.schema), hint, copyButton(JSON.stringify(inferred.schema, null, 2)));
  (form.querySelector(".panel-description") || form.querySelector("h2"))?.after(box);
}

/** "Copy as input schema": the Clipboard API, else the text shown selected for Ctrl+C. */
function copyButton(text) {
  const row = document.createElement("div");
  row.className = "child-contract-copy";
  const button = Object.assign(document.createElement("button"), { type: "button", className: "btn btn-small", textContent: "Copy as input schema" });
  const status = Object.assign(document.createElement("span"), { className: "hint" });
  status.setAttribute("aria-live", "polite");
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      status.textContent = "Copied";
    } catch {
      const area = Object.assign(document.createElement("textarea"), { className: "mono", readOnly: true, rows: 6, value: text });
      area.setAttribute("aria-label", "Input schema");
      row.append(area);
      area.select();
      status.textContent = "Selected: press Ctrl+C";
    }
  });
  row.append(button, status);
  return row;
}
