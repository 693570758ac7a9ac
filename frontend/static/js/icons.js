// Node and palette icons as inline SVG, shipped with the app: no emoji font, no web font,
// no network. Each icon is a list of path data on a 24 x 24 grid, drawn as 2-unit strokes
// with round caps (the look of common line-icon sets; these paths are Railyard's own).
// Icon names are the ones connectors declare (sdk.action(icon=...)); an unknown name shows
// the label's initial in the same circle.

const SVG_NS = "http://www.w3.org/2000/svg";

export const ICON_PATHS = {
  box: ["M3 7l9-4 9 4-9 4-9-4z", "M3 7v10l9 4 9-4V7", "M12 11v10"],
  branch: ["M6 3v12", "M18 9a3 3 0 1 0 0-0.01", "M6 21a3 3 0 1 0 0-0.01", "M18 12c0 4-6 3-12 6"],
  briefcase: ["M3 8h18v12H3z", "M8 8V5h8v3", "M3 13h18"],
  call: ["M5 4h4l2 5-3 2a11 11 0 0 0 5 5l2-3 5 2v4a2 2 0 0 1-2 2A17 17 0 0 1 3 6a2 2 0 0 1 2-2z"],
  clock: ["M12 3a9 9 0 1 0 0.01 0z", "M12 7v5l3 3"],
  edit: ["M4 20h4L19 9l-4-4L4 16z", "M13 7l4 4"],
  filter: ["M3 4h18l-7 9v6l-4 2v-8z"],
  globe: ["M12 3a9 9 0 1 0 0.01 0z", "M3 12h18", "M12 3c3 3 3 15 0 18", "M12 3c-3 3-3 15 0 18"],
  link: ["M10 14a4 4 0 0 0 6 0l3-3a4 4 0 0 0-6-6l-1 1", "M14 10a4 4 0 0 0-6 0l-3 3a4 4 0 0 0 6 6l1-1"],
  loop: ["M4 12a8 8 0 0 1 14-5", "M18 3v4h-4", "M20 12a8 8 0 0 1-14 5", "M6 21v-4h4"],
  mail: ["M3 5h18v14H3z", "M3 6l9 7 9-7"],
  merge: ["M6 3v6c0 4 6 5 6 9v3", "M18 3v6c0 4-6 5-6 9"],
  "message-square": ["M4 4h16v12H8l-4 4z"],
  note: ["M4 4h16v11l-5 5H4z", "M15 20v-5h5", "M8 9h8", "M8 13h5"],
  play: ["M7 4l13 8-13 8z"],
  repeat: ["M4 11V9a3 3 0 0 1 3-3h13", "M17 3l3 3-3 3", "M20 13v2a3 3 0 0 1-3 3H4", "M7 21l-3-3 3-3"],
  reply: ["M10 5L4 11l6 6", "M4 11h10a6 6 0 0 1 6 6v2"],
  search: ["M10 3a7 7 0 1 0 0.01 0z", "M15 15l6 6"],
  send: ["M3 11l18-8-8 18-2-8z", "M11 13l10-10"],
  sigma: ["M18 4H6l6 8-6 8h12"],
  sort: ["M7 4v16", "M3 16l4 4 4-4", "M17 20V4", "M13 8l4-4 4 4"],
  stop: ["M6 6h12v12H6z"],
  switch: ["M4 7h14", "M15 4l3 3-3 3", "M20 17H6", "M9 14l-3 3 3 3"],
  table: ["M3 4h18v16H3z", "M3 10h18", "M3 15h18", "M9 4v16"],
  type: ["M5 6V4h14v2", "M12 4v16", "M9 20h6"],
  user: ["M12 4a4 4 0 1 0 0.01 0z", "M4 21a8 8 0 0 1 16 0"],
  "user-check": ["M10 4a4 4 0 1 0 0.01 0z", "M3 21a7 7 0 0 1 12-5", "M15 19l2 2 4-4"],
  "user-plus": ["M10 4a4 4 0 1 0 0.01 0z", "M3 21a7 7 0 0 1 12-5", "M19 14v6", "M16 17h6"],
  users: ["M9 5a3.5 3.5 0 1 0 0.01 0z", "M2 20a7 7 0 0 1 14 0", "M16 4a3.5 3.5 0 0 1 0 7", "M18 14a7 7 0 0 1 4 6"],
  webhook: ["M9 8a3 3 0 1 1 4 3l3 6", "M7 20a3 3 0 1 1 0-0.01", "M7 20l4-7", "M17 20a3 3 0 1 1 0-0.01", "M17 20H10"],
};

// Node types of the core catalog without a declared icon get one by their type.
const TYPE_ICONS = {
  "control.if": "branch",
  "control.switch": "switch",
  "control.set": "edit",
  "control.delay": "clock",
  "control.wait_until": "clock",
  "control.join": "merge",
  "control.foreach": "loop",
  "control.respond": "reply",
  "control.stop_error": "stop",
  "control.subworkflow": "box",
  "trigger.schedule": "clock",
  "trigger.webhook": "webhook",
  "trigger.manual": "play",
  "http.request": "globe",
  "ui.note": "note",
};

/** The icon name to draw for a node type spec (its own icon, else by type); "" if none. */
export function iconName(spec, type) {
  const own = spec?.icon || "";
  if (ICON_PATHS[own]) return own;
  const byType = TYPE_ICONS[type || spec?.type || ""];
  if (byType) return byType;
  const last = (type || "").split(".").pop() || "";
  for (const word of last.split(/[_-]/)) if (ICON_PATHS[word]) return word;
  return "";
}

/**
 * Append the icon to ``parent`` (an SVG element) as a <g> of paths scaled to ``size``
 * and centred on (0, 0); when there is no icon, a text initial of ``label``.
 */
export function drawIcon(parent, name, label, size = 16) {
  const g = document.createElementNS(SVG_NS, "g");
  g.setAttribute("class", "icon-glyph");
  if (ICON_PATHS[name]) {
    const k = size / 24;
    g.setAttribute("transform", `scale(${k}) translate(-12 -12)`);
    for (const d of ICON_PATHS[name]) {
      const p = document.createElementNS(SVG_NS, "path");
      p.setAttribute("d", d);
      g.appendChild(p);
    }
  } else {
    const t = document.createElementNS(SVG_NS, "text");
    t.setAttribute("text-anchor", "middle");
    t.setAttribute("dominant-baseline", "central");
    t.textContent = (label || "?").charAt(0).toUpperCase();
    g.appendChild(t);
  }
  parent.appendChild(g);
  return g;
}

/** A standalone <svg> icon element for HTML (palette, quick-add list). */
export function iconElement(name, label, size = 16) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", `${-size / 2} ${-size / 2} ${size} ${size}`);
  svg.setAttribute("width", String(size));
  svg.setAttribute("height", String(size));
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "icon-svg");
  drawIcon(svg, name, label, size);
  return svg;
}
