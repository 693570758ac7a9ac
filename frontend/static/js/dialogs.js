// Modal dialogs built from script (the page templates stay small and free of inline code).

/**
 * The <dialog id=id>, created on first use: build(dialog) fills it once; the dialog is
 * labelled by its first heading. Returns the dialog (not yet shown).
 */
export function scriptDialog(id, className, build) {
  let dialog = document.getElementById(id);
  if (dialog) return dialog;
  dialog = document.createElement("dialog");
  dialog.id = id;
  dialog.className = `dialog ${className}`.trim();
  build(dialog);
  const heading = dialog.querySelector("h2");
  if (heading) {
    heading.id = heading.id || `${id}-title`;
    dialog.setAttribute("aria-labelledby", heading.id);
  }
  document.body.append(dialog);
  return dialog;
}
