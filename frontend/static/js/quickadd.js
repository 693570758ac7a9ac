// Quick-add: a searchable list of node types that pops up where a connection from an output
// port was dropped on empty canvas (or the port was clicked, or "A" pressed with a node
// selected). Choosing a type adds that node there, connected from the port.
// Keyboard: type to filter, ArrowUp/ArrowDown to move, Enter to add, Escape to close.

import { iconElement, iconName } from "./icons.js";

/**
 * The node types matching query ``q`` (lower case), best first: an exact type or label
 * ("http.request", "set"), then a label or type starting with it ("http" finds HTTP
 * Request before Respond to Webhook, whose description only mentions HTTP), then a word of
 * the label starting with it, then label or type containing it, then category or
 * description. Every word of ``q`` must occur somewhere. Ties keep catalog order.
 */
export function rankTypes(specs, q) {
  if (!q) return specs;
  const words = q.split(/\s+/).filter(Boolean);
  const ranked = [];
  specs.forEach((s, i) => {
    const label = s.label.toLowerCase();
    const type = s.type.toLowerCase();
    const text = `${label} ${type} ${(s.category || "").toLowerCase()} ${(s.description || "").toLowerCase()}`;
    if (!words.every((w) => text.includes(w))) return;
    let rank = 4;
    if (label === q || type === q || type.split(".").pop() === q) rank = 0;
    else if (label.startsWith(q) || type.startsWith(q) || type.split(".").pop().startsWith(q)) rank = 1;
    else if (label.split(/[^a-z0-9]+/).some((w) => w.startsWith(words[0]))) rank = 2;
    else if (label.includes(q) || type.includes(q)) rank = 3;
    ranked.push({ s, rank, i });
  });
  ranked.sort((a, b) => a.rank - b.rank || a.i - b.i);
  return ranked.map((r) => r.s);
}

export class QuickAdd {
  /**
   * @param {HTMLElement} host  positioned container of the canvas (.canvas-wrap)
   * @param {object[]} catalog  NodeTypeSpec objects (triggers are not offered)
   */
  constructor(host, catalog) {
    this.host = host;
    this.specs = catalog.filter((s) => s.kind !== "trigger");
    this.onPick = null;
    this.root = document.createElement("div");
    this.root.className = "quick-add";
    this.root.hidden = true;
    this.root.setAttribute("role", "dialog");
    this.root.setAttribute("aria-label", "Add a connected node");
    this.input = document.createElement("input");
    this.input.type = "search";
    this.input.placeholder = "Add node…";
    this.input.setAttribute("aria-label", "Search node types");
    this.input.setAttribute("aria-controls", "quick-add-list");
    this.list = document.createElement("ul");
    this.list.id = "quick-add-list";
    this.list.setAttribute("role", "listbox");
    this.root.append(this.input, this.list);
    host.append(this.root);
    this.input.addEventListener("input", () => this.filter());
    this.input.addEventListener("keydown", (e) => this.onKey(e));
    this.list.addEventListener("mousedown", (e) => {
      const li = e.target.closest("li");
      if (!li) return;
      e.preventDefault();
      this.pick(li.dataset.type);
    });
    // Closes shortly after focus leaves (a click on a list item lands first), unless it was
    // opened again meanwhile: a click on another port reopens it before the timer runs.
    this.opened = 0;
    this.input.addEventListener("blur", () => {
      const opened = this.opened;
      setTimeout(() => {
        if (this.opened === opened) this.close();
      }, 120);
    });
  }

  /**
   * Open at viewport point (clientX, clientY); onPick(type) is called with the choice.
   */
  open(clientX, clientY, onPick) {
    this.onPick = onPick;
    this.opened += 1;
    const r = this.host.getBoundingClientRect();
    const x = Math.min(Math.max(8, clientX - r.left), Math.max(8, r.width - 270));
    const y = Math.min(Math.max(8, clientY - r.top), Math.max(8, r.height - 320));
    this.root.style.left = `${x}px`;
    this.root.style.top = `${y}px`;
    this.root.hidden = false;
    this.input.value = "";
    this.filter();
    this.input.focus();
  }

  close() {
    this.root.hidden = true;
    this.onPick = null;
  }

  filter() {
    const q = this.input.value.trim().toLowerCase();
    this.list.replaceChildren();
    const matches = rankTypes(this.specs, q);
    for (const spec of matches.slice(0, 50)) {
      const li = document.createElement("li");
      li.dataset.type = spec.type;
      li.setAttribute("role", "option");
      li.title = spec.description || spec.type;
      const label = document.createElement("span");
      label.textContent = spec.label;
      li.append(iconElement(iconName(spec), spec.label, 14), label);
      this.list.append(li);
    }
    this.setActive(0);
  }

  setActive(i) {
    const items = [...this.list.children];
    items.forEach((li, j) => li.setAttribute("aria-selected", String(j === i)));
    this.active = items.length ? Math.max(0, Math.min(i, items.length - 1)) : -1;
    items[this.active]?.scrollIntoView({ block: "nearest" });
  }

  onKey(e) {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      this.setActive(this.active + (e.key === "ArrowDown" ? 1 : -1));
    } else if (e.key === "Enter") {
      e.preventDefault();
      const li = this.list.children[this.active];
      if (li) this.pick(li.dataset.type);
    } else if (e.key === "Escape") {
      e.preventDefault();
      this.close();
    }
  }

  pick(type) {
    const fn = this.onPick;
    this.close();
    if (fn) fn(type);
  }
}
