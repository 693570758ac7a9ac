// The node palette: catalog node types grouped by category, searchable, draggable onto
// the canvas (HTML5 drag and drop) or added at the canvas centre by click / Enter.

export const DRAG_MIME = "application/x-railyard-node-type";

export function renderPalette(container, search, catalog, { onAdd }) {
  const groups = new Map();
  for (const spec of catalog) {
    const cat = spec.category || "Other";
    if (!groups.has(cat)) groups.set(cat, []);
    groups.get(cat).push(spec);
  }

  container.replaceChildren();
  for (const [category, specs] of groups) {
    const section = document.createElement("section");
    section.className = "palette-group";
    const h = document.createElement("h3");
    h.textContent = category;
    section.appendChild(h);
    for (const spec of specs) section.appendChild(paletteItem(spec, onAdd));
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

function paletteItem(spec, onAdd) {
  const item = document.createElement("div");
  item.className = `palette-item kind-${spec.kind}`;
  item.dataset.type = spec.type;
  item.dataset.search = [spec.label, spec.type, spec.category, spec.description].join(" ").toLowerCase();
  item.draggable = true;
  item.tabIndex = 0;
  item.setAttribute("role", "button");
  item.title = spec.description ? `${spec.description}\n(${spec.type})` : spec.type;

  const icon = document.createElement("span");
  icon.className = "palette-icon";
  icon.textContent = spec.icon && [...spec.icon].length <= 2 ? spec.icon : (spec.label || "?").charAt(0).toUpperCase();
  const text = document.createElement("span");
  text.className = "palette-text";
  const label = document.createElement("span");
  label.className = "palette-label";
  label.textContent = spec.label;
  const type = document.createElement("span");
  type.className = "palette-type";
  type.textContent = spec.type;
  text.append(label, type);
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
