// The import dialog: an exported workflow (railyard/workflow JSON) from a file, the
// clipboard or typed in, sent to the import API. Used by the workflow list (import as a
// new workflow) and the versions page (import into the draft). References the server
// could not re-bind come back as diagnostics: they are listed with a link to the designer,
// where each one is a field to pick.

import { errorMessage, request } from "./api.js";
import { scriptDialog } from "./dialogs.js";

/**
 * @param {object} options
 *   title: dialog heading; help: one line under it; submitLabel: the button's text;
 *   askName: show an optional name field (new workflows);
 *   url(name): the API URL to POST the document to;
 *   onConflict(resp): optional, called on 409 (the draft moved on).
 */
export function openImportDialog({ title, help, submitLabel = "Import", askName = false, url, onConflict }) {
  const dialog = scriptDialog("import-dialog", "import-dialog", (d) => {
    d.innerHTML = `
      <h2 id="import-title"></h2>
      <p class="muted small" id="import-help"></p>
      <div class="import-sources">
        <label class="btn btn-small" for="import-file">Choose file…</label>
        <input type="file" id="import-file" accept=".json,application/json" class="sr-only">
        <button type="button" class="btn btn-small" id="import-paste">Paste from clipboard</button>
        <span class="muted small" id="import-file-name"></span>
      </div>
      <label for="import-text">Export document (JSON)</label>
      <textarea id="import-text" class="mono" spellcheck="false" placeholder='{"format": "railyard/workflow", ...}'></textarea>
      <div id="import-name-row">
        <label for="import-name">Name (optional)</label>
        <input type="text" id="import-name" maxlength="200" placeholder="As exported">
      </div>
      <p id="import-error" class="field-error" role="alert" hidden></p>
      <div id="import-result" class="import-result" hidden></div>
      <div class="dialog-actions">
        <button type="button" class="btn" id="import-cancel">Close</button>
        <button type="button" class="btn btn-primary" id="import-submit"></button>
      </div>`;
    d.querySelector("#import-cancel").addEventListener("click", () => d.close());
    d.querySelector("#import-file").addEventListener("change", async (e) => {
      const file = e.target.files[0];
      if (!file) return;
      d.querySelector("#import-file-name").textContent = file.name;
      d.querySelector("#import-text").value = await file.text();
    });
    d.querySelector("#import-paste").addEventListener("click", async () => {
      const error = d.querySelector("#import-error");
      try {
        d.querySelector("#import-text").value = await navigator.clipboard.readText();
        error.hidden = true;
      } catch {
        error.textContent = "The browser did not let the page read the clipboard: click the box and press Ctrl+V.";
        error.hidden = false;
        d.querySelector("#import-text").focus();
      }
    });
  });
  dialog.querySelector("#import-title").textContent = title;
  dialog.querySelector("#import-help").textContent = help;
  dialog.querySelector("#import-name-row").hidden = !askName;
  dialog.querySelector("#import-error").hidden = true;
  dialog.querySelector("#import-result").hidden = true;
  const submit = dialog.querySelector("#import-submit");
  submit.textContent = submitLabel;
  submit.disabled = false;
  submit.onclick = () => send(dialog, { url, onConflict });
  if (!dialog.open) dialog.showModal();
  dialog.querySelector("#import-text").focus();
  return dialog;
}

async function send(dialog, { url, onConflict }) {
  const error = dialog.querySelector("#import-error");
  const submit = dialog.querySelector("#import-submit");
  error.hidden = true;
  let doc;
  try {
    doc = JSON.parse(dialog.querySelector("#import-text").value);
  } catch (err) {
    error.textContent = `Not valid JSON: ${err.message}`;
    error.hidden = false;
    return;
  }
  submit.disabled = true;
  let resp;
  try {
    resp = await request("POST", url(dialog.querySelector("#import-name").value.trim()), doc);
  } catch (err) {
    resp = { ok: false, status: 0, data: { detail: err.message } };
  } finally {
    submit.disabled = false;
  }
  if (resp.status === 409 && onConflict) {
    onConflict(resp);
    return;
  }
  if (!resp.ok) {
    const where = resp.data?.field ? ` (at ${resp.data.field})` : "";
    error.textContent = `${errorMessage(resp)}${where}`;
    error.hidden = false;
    return;
  }
  const warnings = (resp.data.diagnostics || []).filter((d) => d.code.startsWith("import_"));
  if (!warnings.length) {
    location.href = samePage(resp.data.url);
    return;
  }
  showWarnings(dialog, resp.data, warnings);
}

/** The path (and query) of an absolute URL the API answered: the designer opens on
 * the origin this page was served from, whatever public base URL the server is set to. */
function samePage(url) {
  const parsed = new URL(url, location.href);
  return parsed.pathname + parsed.search;
}

/** The references that need picking, and a link to the designer. */
function showWarnings(dialog, data, warnings) {
  const box = dialog.querySelector("#import-result");
  const heading = document.createElement("p");
  heading.innerHTML = `<strong>Imported.</strong> ${warnings.length} reference${warnings.length === 1 ? "" : "s"} could not be re-bound: pick ${warnings.length === 1 ? "it" : "them"} in the designer.`;
  const list = document.createElement("ul");
  list.id = "import-warnings";
  for (const w of warnings) {
    const li = document.createElement("li");
    li.dataset.code = w.code;
    const where = w.node_id ? `${w.node_id}.${w.field}` : w.field;
    li.innerHTML = "<code></code>: <span></span>";
    li.querySelector("code").textContent = where;
    li.querySelector("span").textContent = w.message;
    list.append(li);
  }
  const link = document.createElement("a");
  link.className = "btn btn-primary";
  link.id = "import-open";
  link.href = samePage(data.url);
  link.textContent = `Open ${data.name} in the designer`;
  box.replaceChildren(heading, list, link);
  box.hidden = false;
  dialog.querySelector("#import-submit").disabled = true;
}
