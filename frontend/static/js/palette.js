// The node palette: catalog node types grouped by connector (core nodes by category; every
// trigger under Triggers too), each group headed by its connector's icon and label; searchable;
// draggable onto the canvas (HTML5 drag and drop; dropped on an edge it is inserted into the
// edge) or added at the canvas centre by click / Enter. Icons: icons.js.

import { iconElement, iconName, pluginIconUrl } from "./icons.js";

export const DRAG_MIME = "application/x-railyard-node-type";

/**
 * [{key, label, icon, specs}] in palette order: core categories first, then connectors by
 * label. Every trigger is under Triggers (a workflow starts with one); a connector's
 * triggers are also in its own group, with its actions.
 */
export function paletteGroups(catalog, connectors = []) {
  const info = new Map(connectors.map((c) => [c.name, c]));
  const groups = new Map();
  const add = (key, fields, spec) => {
    if (!groups.has(key)) groups.set(key, { key, ...fields, specs: [] });
    groups.get(key).specs.push(spec);
  };
  const core = (label) => ({ core: true, label, icon: "", version: "" });
  for (const spec of catalog) {
    const connector = spec.connector && spec.connector !== "core" ? info.get(spec.connector) : null;
    if (spec.kind === "trigger" && connector) add("core:Triggers", core("Triggers"), spec);
    if (connector) {
      const { name, label, icon, version } = connector;
      add(`connector:${name}`, { core: false, label, icon, version }, spec);
    } else {
      add(`core:${spec.category || "Other"}`, core(spec.category || "Other"), spec);
    }
  }
  const all = [...groups.values()];
  const first = all.filter((g) => g.core);
  const rest = all.filter((g) => !g.core).sort((a, b) => a.label.localeCompare(b.label));
  return [...first, ...rest];
}

export function renderPalette(container, search, catalog, { onAdd, connectors = [] }) {
  container.replaceChildren();
  const info = new Map(connectors.map((c) => [c.name, c]));
  for (const group of paletteGroups(catalog, connectors)) {
    const section = document.createElement("section");
    section.className = "palette-group";
    section.dataset.group = group.key;
    const h = document.createElement("h3");
    h.className = "palette-group-title";
    if (!group.core) {
      const icon = document.createElement("span");
      icon.className = "palette-group-icon";
      icon.setAttribute("aria-hidden", "true");
      icon.append(iconElement(group.icon, group.label, 14));
      h.appendChild(icon);
      h.title = `${group.label} connector ${group.version}`;
    }
    h.append(group.label);
    section.appendChild(h);
    for (const spec of group.specs) {
      // a connector's trigger is found by its connector's name too ("slack" finds Slack's)
      const groupWords = group.core ? info.get(spec.connector)?.label || "" : group.label;
      section.appendChild(paletteItem(spec, groupWords, onAdd));
    }
    container.appendChild(section);
  }

  search.addEventListener("input", () => {
    const q = search.value.trim().toLowerCase();
    for (const section of container.querySelectorAll(".palette-group")) {
      let visible = 0;
      for (const item of section.querySelectorAll(".palette-item")) {
        const match = !q || item.dataset.search.includes(q);
        item.hidden = !match;
        if (match) visible++;
      }
      section.hidden = visible === 0;
    }
  });
}

function paletteItem(spec, groupWords, onAdd) {
  const item = document.createElement("div");
  item.className = `palette-item kind-${spec.kind}`;
  item.dataset.type = spec.type;
  item.dataset.search = [spec.label, spec.type, spec.category, spec.description, groupWords].join(" ").toLowerCase();
  item.draggable = true;
  item.tabIndex = 0;
  item.setAttribute("role", "button");
  item.title = spec.description ? `${spec.description}\n(${spec.type})` : spec.type;

  const icon = document.createElement("span");
  const glyph = iconName(spec);
  icon.className = pluginIconUrl(glyph) ? "palette-icon has-image" : "palette-icon";
  icon.append(iconElement(glyph, spec.label, 16));
  const text = document.createElement("span");
  text.className = "palette-text";
  const label = document.createElement("span");
  label.className = "palette-label";
  label.textContent = spec.label;
  const sub = document.createElement("span");
  sub.className = "palette-type";
  sub.textContent = spec.description || spec.category || "";
  text.append(label, sub);
  item.append(icon, text);

  item.addEventListener("dragstart", (e) => {
    e.dataTransfer.setData(DRAG_MIME, spec.type);
    e.dataTransfer.setData("text/plain", spec.type);
    e.dataTransfer.effectAllowed = "copy";
  });
  item.addEventListener("click", () => onAdd(spec.type, null));
  item.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      onAdd(spec.type, null);
    }
  });
  return item;
}

/** Make the canvas accept palette drops; onDrop(type, clientX, clientY). */
export function acceptDrops(svg, onDrop) {
  svg.addEventListener("dragover", (e) => {
    const types = Array.from(e.dataTransfer?.types || []);
    if (types.includes(DRAG_MIME) || types.includes("text/plain")) {
      e.preventDefault();
      e.dataTransfer.dropEffect = "copy";
      svg.classList.add("drop-active");
    }
  });
  svg.addEventListener("dragleave", () => svg.classList.remove("drop-active"));
  svg.addEventListener("drop", (e) => {
    svg.classList.remove("drop-active");
    const type = e.dataTransfer.getData(DRAG_MIME) || e.dataTransfer.getData("text/plain");
    if (!type) return;
    e.preventDefault();
    onDrop(type, e.clientX, e.clientY);
  });
}
