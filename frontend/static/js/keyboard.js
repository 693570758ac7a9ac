// Keyboard shortcuts of the designer and the help overlay that lists them ("?").
//
// SHORTCUTS is the one list: the key handler matches it and the overlay shows it, so the
// two cannot disagree. "Mod" is Ctrl, or Cmd on a Mac. Keys typed into a form control, or
// while a dialog is open, are left alone.

import { scriptDialog } from "./dialogs.js";

export const SHORTCUTS = [
  { keys: ["Mod+Z"], action: "undo", label: "Undo" },
  { keys: ["Mod+Shift+Z", "Mod+Y"], action: "redo", label: "Redo" },
  { keys: ["Mod+C"], action: "copy", label: "Copy the selected nodes (with the edges between them)" },
  { keys: ["Mod+X"], action: "cut", label: "Cut" },
  { keys: ["Mod+V"], action: "paste", label: "Paste (also nodes copied in another workflow)" },
  { keys: ["Mod+D"], action: "duplicate", label: "Duplicate" },
  { keys: ["Mod+A"], action: "selectAll", label: "Select all nodes" },
  { keys: ["Delete", "Backspace"], action: "delete", label: "Delete the selection" },
  { keys: ["Escape"], action: "deselect", label: "Clear the selection / close" },
  { keys: ["Tab", "Shift+Tab"], action: null, label: "Move the focus from node to node" },
  { keys: ["Enter"], action: "open", label: "Select the focused node and open its settings" },
  { keys: ["Enter"], action: null, label: "On a field of a step's input (data view, Input fields): map it into the setting focused last" },
  { keys: ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"], action: "nudge", label: "Move the selection one grid step (Shift: 1 px)" },
  { keys: ["A"], action: "quickAdd", label: "Add a node after the selected one (searchable list)" },
  { keys: ["C"], action: "connect", label: "Connect the two selected nodes (first selected is the source)" },
  { keys: ["N"], action: "note", label: "Add a sticky note" },
  { keys: ["L"], action: "layout", label: "Auto-layout, left to right" },
  { keys: ["B"], action: "boxMode", label: "Toggle box-select mode (or drag with Shift)" },
  { keys: ["G"], action: "snap", label: "Toggle snap to grid" },
  { keys: ["+", "="], action: "zoomIn", label: "Zoom in" },
  { keys: ["-"], action: "zoomOut", label: "Zoom out" },
  { keys: ["0"], action: "fit", label: "Fit the diagram to the view" },
  { keys: ["Mod+S"], action: "save", label: "Save the draft now" },
  { keys: ["?"], action: "help", label: "Show this list" },
];

const MAC = /Mac|iPhone|iPad/.test(navigator.platform || "");

/** The key name of an event as written in SHORTCUTS ("Mod+Shift+Z", "ArrowUp", "?"). */
export function keyName(e) {
  const mod = MAC ? e.metaKey : e.ctrlKey;
  let key = e.key.length === 1 ? e.key.toUpperCase() : e.key;
  // Shift is part of the character for punctuation ("?", "+"): only named with Mod.
  const printable = e.key.length === 1 && !/[A-Za-z0-9]/.test(e.key);
  if (printable && !mod) return e.key;
  if (key === " ") key = "Space";
  return [mod ? "Mod" : "", e.shiftKey && !printable ? "Shift" : "", e.altKey ? "Alt" : "", key].filter(Boolean).join("+");
}

function find(name) {
  // Arrow keys with Shift nudge finely: match them without Shift.
  const plain = name.replace(/^Shift\+(Arrow)/, "$1");
  return SHORTCUTS.find((s) => s.action && (s.keys.includes(name) || s.keys.includes(plain))) || null;
}

/**
 * Listen for shortcuts on ``root`` (the document).
 * @param {Record<string, (e: KeyboardEvent) => void>} actions  action name -> handler
 */
export function bindShortcuts(root, actions) {
  root.addEventListener("keydown", (e) => {
    const t = e.target;
    if (t.closest && t.closest("input, textarea, select, [contenteditable], dialog, .quick-add")) return;
    const shortcut = find(keyName(e));
    if (!shortcut || !actions[shortcut.action]) return;
    // Enter keeps its meaning on buttons, links and palette items.
    if (e.key === "Enter" && t.closest && t.closest("button, a, .palette-item")) return;
    e.preventDefault();
    actions[shortcut.action](e);
  });
}

/** Show the shortcut list in a modal dialog (built once, then reused). */
export function showHelp() {
  const dialog = scriptDialog("shortcut-help", "shortcut-help", (d) => {
    const h = document.createElement("h2");
    h.textContent = "Keyboard shortcuts";
    const table = document.createElement("table");
    table.className = "shortcut-table";
    for (const s of SHORTCUTS) {
      const tr = table.insertRow();
      const keys = tr.insertCell();
      s.keys.forEach((k, i) => {
        if (i) keys.append(" / ");
        const kbd = document.createElement("kbd");
        kbd.textContent = k.replace("Mod", MAC ? "⌘" : "Ctrl");
        keys.append(kbd);
      });
      tr.insertCell().textContent = s.label;
    }
    const more = document.createElement("p");
    more.className = "muted small";
    more.textContent = "Mouse: drag the background to pan, wheel to zoom, Shift-drag to box-select, " +
      "Shift/Ctrl-click to add to the selection, drag a palette node onto an edge to insert it, " +
      "drag from an output port to empty space (or click the port) to add a connected node.";
    const actions = document.createElement("div");
    actions.className = "dialog-actions";
    const close = document.createElement("button");
    close.type = "button";
    close.className = "btn";
    close.textContent = "Close";
    close.addEventListener("click", () => d.close());
    actions.append(close);
    d.append(h, table, more, actions);
  });
  dialog.showModal();
  // the Close button is at the end: focus it without scrolling the list away from its top
  dialog.querySelector("button").focus({ preventScroll: true });
  dialog.scrollTop = 0;
}
