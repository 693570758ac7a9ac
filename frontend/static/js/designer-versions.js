// Versions in the designer: "Restore" on the versions page opens the designer with
// ?restore=N. The draft is saved first (when it has unsaved edits), then the server
// restores version N into the draft, based on the draft revision this page holds (someone
// else's newer save is refused, 409, and nothing changes). The restored diagram becomes
// one undoable edit: Ctrl+Z brings the previous drawing back (and autosave stores it).
//
// Loaded after designer.js, whose window.railyardDesigner holds the model and the saver.

import { errorMessage, postJSON } from "./api.js";

const designer = window.railyardDesigner;
const root = document.getElementById("designer");
// The designer's own status line: a message shown through it is not replaced by the
// background check that follows the restored diagram.
const say = designer.setStatus;

/** Restore version ``number`` into the draft; resolves to true when done. */
export async function restoreVersion(number) {
  const { model, saver, canvas } = designer;
  if (saver.dirty && !(await saver.save())) {
    say(`Version ${number} not restored: the draft could not be saved first`, "error");
    return false;
  }
  say(`Restoring version ${number}…`, "busy");
  let resp;
  try {
    resp = await postJSON(`/api/v1/workflows/${root.dataset.workflowId}/versions/${number}/restore`, {
      base_revision: saver.revision,
    });
  } catch (err) {
    say(`Restore failed: ${err.message}`, "error");
    return false;
  }
  if (!resp.ok) {
    say(`Version ${number} not restored: ${errorMessage(resp)}`, "error");
    return false;
  }
  const { nodes, edges } = resp.data.diagram;
  canvas.select(null);
  model.restore(JSON.stringify({ nodes, edges }), "restore"); // an undoable edit
  saver.adopt(resp.data.revision); // the server holds this diagram already
  canvas.fitReadable();
  say(`Restored version ${number} into the draft (Ctrl+Z undoes it)`, "ok");
  return true;
}

const params = new URLSearchParams(location.search);
const wanted = params.get("restore");
if (wanted && /^\d+$/.test(wanted) && document.getElementById("save-btn")) {
  history.replaceState(null, "", location.pathname);
  restoreVersion(Number(wanted));
}
designer.restoreVersion = restoreVersion; // for e2e tests
