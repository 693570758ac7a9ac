// The versions page (templates/versions.html): "Copy JSON" puts an export document on the
// clipboard; "Import into draft…" replaces the draft with an exported workflow (based on
// the draft revision the page was rendered with: a newer save by someone else is refused).

import { errorMessage, getJSON } from "./api.js";
import { copyText } from "./clipboard.js";
import { openImportDialog } from "./import-dialog.js";

const actions = document.getElementById("versions-actions");
const workflowId = actions.dataset.workflowId;
const status = document.getElementById("versions-status");

function say(text, kind = "") {
  status.textContent = text;
  status.dataset.kind = kind;
}

for (const button of document.querySelectorAll(".copy-json")) {
  button.addEventListener("click", async () => {
    let resp;
    try {
      resp = await getJSON(button.dataset.export);
    } catch (err) {
      say(`Export failed: ${err.message}`, "error");
      return;
    }
    if (!resp.ok) {
      say(`Export failed: ${errorMessage(resp)}`, "error");
      return;
    }
    // The clipboard fallback selects the text of an element: keep it in a hidden one.
    const holder = document.createElement("pre");
    holder.className = "sr-only";
    holder.textContent = resp.text;
    document.body.append(holder);
    const outcome = await copyText(resp.text, holder);
    if (outcome === "copied") holder.remove();
    say(outcome === "copied" ? "Copied the export to the clipboard" : "Selected: press Ctrl+C to copy", "ok");
  });
}

document.getElementById("import-draft-btn")?.addEventListener("click", () => {
  openImportDialog({
    title: "Import into the draft",
    help: "Replaces this workflow's draft with the exported diagram (name and settings stay). Publish stays a separate step.",
    submitLabel: "Replace the draft",
    url: () => `/api/v1/workflows/${workflowId}/import?base_revision=${actions.dataset.draftRevision}`,
    onConflict: (resp) => {
      const error = document.getElementById("import-error");
      error.textContent = `${resp.data?.detail || "The draft changed"}: reload the page to import on top of it.`;
      error.hidden = false;
    },
  });
});
