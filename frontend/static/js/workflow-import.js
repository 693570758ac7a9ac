// "Import" on the workflow list: a new workflow from an exported one (import-dialog.js).

import { openImportDialog } from "./import-dialog.js";

document.getElementById("import-workflow-btn")?.addEventListener("click", () => {
  openImportDialog({
    title: "Import a workflow",
    help: "A workflow exported from Railyard (this or another installation). Credentials and called workflows are matched by name.",
    askName: true,
    url: (name) => `/api/v1/workflows/import${name ? `?name=${encodeURIComponent(name)}` : ""}`,
  });
});
