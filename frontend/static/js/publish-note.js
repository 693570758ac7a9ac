// Publish asks for an optional note: what changed and why, shown in the version history.

import { scriptDialog } from "./dialogs.js";

/**
 * Ask for the note of the version about to be published.
 * @returns {Promise<string | null>} the note ("" for none), or null when cancelled
 */
export function askPublishNote() {
  const dialog = scriptDialog("publish-dialog", "publish-note-dialog", (d) => {
    d.innerHTML = `
      <form method="dialog" id="publish-form">
        <h2>Publish a new version</h2>
        <p class="muted small">Runs, webhooks and schedules switch to it. Earlier versions stay in the history.</p>
        <label for="publish-note">Note (optional)</label>
        <textarea id="publish-note" maxlength="2000" placeholder="What changed, and why"></textarea>
        <div class="dialog-actions">
          <button type="button" class="btn" id="publish-cancel">Cancel</button>
          <button type="submit" class="btn btn-primary" id="publish-confirm" value="publish">Publish</button>
        </div>
      </form>`;
    d.querySelector("#publish-cancel").addEventListener("click", () => d.close("cancel"));
    // Ctrl/Cmd+Enter publishes from the note field.
    d.querySelector("#publish-note").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        d.querySelector("#publish-confirm").click();
      }
    });
  });
  const note = dialog.querySelector("#publish-note");
  note.value = "";
  dialog.returnValue = "";
  dialog.showModal();
  note.focus();
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => resolve(dialog.returnValue === "cancel" || dialog.returnValue === "" ? null : note.value.trim()),
      { once: true },
    );
  });
}
