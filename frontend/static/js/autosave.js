// Saving the draft: on demand (Save, Ctrl+S) and automatically AUTOSAVE_MS after the last
// edit. Publishing stays explicit.
//
// Every save carries the draft revision it is based on (base_revision: the revision the
// page loaded or last saved). When someone else saved in between, the server answers 409
// with who and when; nothing is overwritten. The conflict dialog then offers "Reload" (take
// their draft, dropping the local edits) or "Overwrite" (save the local draft on top of
// theirs, knowingly). Until the user chooses, autosave stays off.

import { errorMessage, putJSON } from "./api.js";
import { scriptDialog } from "./dialogs.js";

export const AUTOSAVE_MS = 2000;

export class DraftSaver {
  /**
   * @param {string} workflowId
   * @param {number} revision  the draft revision the page was rendered with
   * @param {{diagram: () => object, onSaved: (data: object) => void,
   *          onStatus: (text: string, kind?: string) => void}} hooks
   */
  constructor(workflowId, revision, { diagram, onSaved, onStatus }) {
    this.url = `/api/v1/workflows/${workflowId}/draft`;
    this.revision = revision;
    this.diagram = diagram;
    this.onSaved = onSaved;
    this.onStatus = onStatus;
    this.dirty = false;
    this.timer = null;
    this.inFlight = null;
    this.conflict = null; // the 409 body while the user has not chosen
  }

  /** An edit happened: save in AUTOSAVE_MS unless another edit comes first. */
  changed() {
    this.dirty = true;
    clearTimeout(this.timer);
    if (!this.conflict) this.timer = setTimeout(() => this.save({ auto: true }), AUTOSAVE_MS);
  }

  /** Save now; resolves to true when the draft is stored. */
  async save({ auto = false, overwrite = false } = {}) {
    clearTimeout(this.timer);
    if (this.inFlight) await this.inFlight; // one save at a time, in order
    if (this.conflict && !overwrite) {
      this.showConflict(this.conflict);
      return false;
    }
    this.inFlight = this.put(auto, overwrite);
    try {
      return await this.inFlight;
    } finally {
      this.inFlight = null;
    }
  }

  async put(auto, overwrite) {
    const base = overwrite && this.conflict ? this.conflict.revision : this.revision;
    const wasDirty = this.dirty;
    this.dirty = false;
    this.onStatus(auto ? "Autosaving…" : "Saving…", "busy");
    let resp;
    try {
      resp = await putJSON(this.url, { diagram: this.diagram(), base_revision: base });
    } catch (err) {
      this.dirty = this.dirty || wasDirty;
      this.onStatus(`Save failed: ${err.message}`, "error");
      return false;
    }
    if (resp.status === 409 && resp.data && typeof resp.data.revision === "number") {
      this.dirty = true;
      this.conflict = resp.data;
      this.onStatus("Not saved: someone else changed this draft", "error");
      this.showConflict(resp.data);
      return false;
    }
    if (!resp.ok) {
      this.dirty = this.dirty || wasDirty;
      this.onStatus(`Save failed: ${errorMessage(resp)}`, "error");
      return false;
    }
    this.conflict = null;
    this.revision = resp.data.revision;
    this.onSaved(resp.data);
    if (this.dirty) this.changed(); // edited while the save was on its way
    return true;
  }

  /**
   * The server stored the current diagram itself (a restore from the version history):
   * take its revision; nothing is left to save.
   */
  adopt(revision) {
    clearTimeout(this.timer);
    this.revision = revision;
    this.dirty = false;
    this.conflict = null;
  }

  /** The conflict dialog: who changed the draft, and Reload / Overwrite. */
  showConflict(info) {
    const dialog = scriptDialog("conflict-dialog", "", (d) => {
      d.innerHTML = `
        <h2 id="conflict-title">This draft was changed by someone else</h2>
        <p id="conflict-detail"></p>
        <p class="muted small">Reload shows their draft and drops your unsaved changes.
          Overwrite replaces their changes with yours.</p>
        <div class="dialog-actions">
          <button type="button" class="btn" id="conflict-later">Decide later</button>
          <button type="button" class="btn" id="conflict-reload">Reload their draft</button>
          <button type="button" class="btn btn-danger" id="conflict-overwrite">Overwrite with mine</button>
        </div>`;
      d.querySelector("#conflict-later").addEventListener("click", () => d.close());
      d.querySelector("#conflict-reload").addEventListener("click", () => {
        this.dirty = false; // the user chose to drop the local edits
        location.reload();
      });
      d.querySelector("#conflict-overwrite").addEventListener("click", async () => {
        d.close();
        await this.save({ overwrite: true });
      });
    });
    const who = info.saved_by || "someone else";
    const when = info.saved_at ? new Date(info.saved_at).toLocaleString() : "recently";
    dialog.querySelector("#conflict-detail").textContent =
      `${who} saved this draft at ${when} (revision ${info.revision}), after you opened it. Your changes are not saved yet.`;
    if (!dialog.open) dialog.showModal();
  }
}
