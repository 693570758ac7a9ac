// Wires the designer's editing: undo/redo history, edit commands (editing.js), the canvas
// toolbar buttons and the keyboard shortcuts (keyboard.js), and keeps the config panel in
// step when undo/redo changes the node it shows.

import { Editor } from "./editing.js";
import { History } from "./history.js";
import { bindShortcuts, showHelp } from "./keyboard.js";
import { NODE_WIDTH } from "./model.js";

const SNAP_KEY = "railyard.designer.snap";

// What a user who may not edit can still do from the keyboard: look, select, copy.
const READ_ONLY_ACTIONS = new Set(["copy", "selectAll", "deselect", "open", "zoomIn", "zoomOut", "fit", "help"]);

/**
 * @param {{model, canvas, panel, setStatus, save: () => void, quickAdd, readOnly: boolean}} parts
 *   readOnly: the user may not edit (no edit buttons in the page, only READ_ONLY_ACTIONS)
 * @returns {Editor} the editor, with ``history`` set
 */
export function wireEditing({ model, canvas, panel, setStatus, save, quickAdd, readOnly = false }) {
  const editor = new Editor(model, canvas, { onStatus: setStatus });
  const button = (id) => document.getElementById(id);
  const undoBtn = button("undo-btn");
  const redoBtn = button("redo-btn");
  const history = new History(model, {
    onChange(h) {
      if (undoBtn) undoBtn.disabled = !h.canUndo;
      if (redoBtn) redoBtn.disabled = !h.canRedo;
    },
  });
  editor.history = history;
  if (undoBtn) undoBtn.disabled = redoBtn.disabled = true;

  // After undo/redo the open panel may show a config that is no longer there.
  let panelConfig = null;
  model.onChange((kind, info = {}) => {
    if (kind !== "graph") return;
    const node = panel.nodeId ? model.node(panel.nodeId) : null;
    const now = node ? JSON.stringify([node.label, node.config]) : null;
    if (info.source === "history") {
      canvas.changeSelection(() => {});
      if (!node) panel.close();
      else if (now !== panelConfig) panel.open(node.id);
    }
    panelConfig = now;
  });

  const setToggle = (btn, on) => {
    if (!btn) return;
    btn.setAttribute("aria-pressed", String(on));
    btn.classList.toggle("active", on);
  };
  const snapBtn = button("snap-btn");
  const boxBtn = button("box-btn");
  canvas.snap = readFlag(SNAP_KEY, true);
  setToggle(snapBtn, canvas.snap);
  setToggle(boxBtn, false);

  const selectedNode = () => {
    const one = canvas.selection;
    return one && one.kind === "node" ? model.node(one.id) : null;
  };
  const actions = {
    undo: () => history.undo(),
    redo: () => history.redo(),
    copy: () => editor.copy(),
    cut: () => editor.cut(),
    paste: () => editor.paste(),
    duplicate: () => editor.duplicate(),
    selectAll: () => editor.selectAll(),
    delete: () => editor.deleteSelection(),
    deselect: () => {
      quickAdd.close();
      canvas.select(null);
    },
    open: (e) => {
      // Enter on a button or palette item is theirs; on the canvas it opens the node.
      if (!canvas.svg.contains(e.target)) return;
      const g = e.target.closest(".node");
      if (g) canvas.select({ kind: "node", id: g.dataset.nodeId });
      else if (selectedNode()) panel.open(selectedNode().id);
    },
    nudge: (e) => {
      const d = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[e.key];
      editor.nudge(d[0], d[1], e.shiftKey);
    },
    quickAdd: () => {
      const node = selectedNode();
      const port = node ? model.outputsOf(node)[0] : null;
      if (!port) {
        setStatus("Select a node with an output to add a node after it", "error");
        return;
      }
      const g = canvas.nodeEls.get(node.id);
      const r = g.getBoundingClientRect();
      quickAdd.open(r.right + 16, r.top, (type) => editor.addAfter(node.id, port, type));
    },
    connect: () => editor.connectSelected(),
    note: () => {
      const c = canvas.visibleCenter();
      editor.addNote(c.x - NODE_WIDTH / 2, c.y - 40);
    },
    layout: () => editor.autoLayout(),
    boxMode: () => {
      canvas.boxMode = !canvas.boxMode;
      setToggle(boxBtn, canvas.boxMode);
      canvas.svg.classList.toggle("box-mode", canvas.boxMode);
    },
    snap: () => {
      canvas.snap = !canvas.snap;
      setToggle(snapBtn, canvas.snap);
      writeFlag(SNAP_KEY, canvas.snap);
    },
    zoomIn: () => canvas.zoomAt(1.2),
    zoomOut: () => canvas.zoomAt(1 / 1.2),
    fit: () => canvas.fitReadable(),
    save,
    help: showHelp,
  };
  if (readOnly) {
    for (const name of Object.keys(actions)) if (!READ_ONLY_ACTIONS.has(name)) delete actions[name];
  }
  bindShortcuts(document, actions);
  for (const [id, action] of [
    ["undo-btn", "undo"], ["redo-btn", "redo"], ["layout-btn", "layout"], ["snap-btn", "snap"],
    ["box-btn", "boxMode"], ["note-btn", "note"], ["help-btn", "help"],
  ]) {
    // the edit buttons are not in the page of a user who may not edit
    if (actions[action]) button(id)?.addEventListener("click", (e) => actions[action](e));
  }
  return editor;
}

function readFlag(key, fallback) {
  try {
    const v = localStorage.getItem(key);
    return v === null ? fallback : v === "1";
  } catch {
    return fallback;
  }
}

function writeFlag(key, on) {
  try {
    localStorage.setItem(key, on ? "1" : "0");
  } catch {
    // storage disabled: the setting lasts for this page
  }
}
