// Undo/redo of every edit of a DiagramModel, by snapshots.
//
// After each "graph" change the model's nodes and edges are compared with the last known
// state; when they differ, the previous state goes on the undo stack. One user action is
// one change (a drag emits once at the end, paste / delete / auto-layout use model.batch),
// so it is one step. Edits tagged alike (typing in one node's config field: tag
// "config:<id>") within MERGE_MS of each other merge into one step, so undo does not
// walk back character by character. Viewport changes (pan, zoom) are not edits.

const LIMIT = 200;
const MERGE_MS = 1000;

export class History {
  /**
   * @param {import("./model.js").DiagramModel} model
   * @param {{onChange?: (history: History) => void, now?: () => number}} options
   *   onChange: called when canUndo / canRedo may have changed
   */
  constructor(model, { onChange = () => {}, now = () => Date.now() } = {}) {
    this.model = model;
    this.onChange = onChange;
    this.now = now;
    this.undoStack = [];
    this.redoStack = [];
    this.current = model.snapshot();
    this.lastTag = null;
    this.lastAt = 0;
    model.onChange((kind, info = {}) => {
      if (kind === "graph" && info.source !== "history") this.record(info.tag || null);
    });
  }

  get canUndo() {
    return this.undoStack.length > 0;
  }

  get canRedo() {
    return this.redoStack.length > 0;
  }

  /** Take note of the model's state after an edit (called on every graph change). */
  record(tag) {
    const next = this.model.snapshot();
    if (next === this.current) return;
    const at = this.now();
    const merge = tag && tag === this.lastTag && at - this.lastAt < MERGE_MS && this.undoStack.length;
    if (!merge) {
      this.undoStack.push(this.current);
      if (this.undoStack.length > LIMIT) this.undoStack.shift();
    }
    this.current = next;
    this.redoStack = [];
    this.lastTag = tag;
    this.lastAt = at;
    this.onChange(this);
  }

  /** Forget the history (after loading another draft): the current state is the start. */
  reset() {
    this.undoStack = [];
    this.redoStack = [];
    this.current = this.model.snapshot();
    this.lastTag = null;
    this.onChange(this);
  }

  undo() {
    return this.step(this.undoStack, this.redoStack);
  }

  redo() {
    return this.step(this.redoStack, this.undoStack);
  }

  step(from, to) {
    if (!from.length) return false;
    to.push(this.current);
    this.current = from.pop();
    this.lastTag = null;
    this.model.restore(this.current, "history");
    this.onChange(this);
    return true;
  }
}
