// Node and palette icons, served by the app: no icon font, no network beyond it.
// A node type's icon (spec.icon, resolved by the catalog when connectors load) is either
// - a Lucide name ("globe"): one <symbol> of the sprite the server builds from the vendored
//   Lucide icons (frontend/static/vendor/lucide, ISC licence), drawn with <use>, so it takes
//   the colour of the text around it; or
// - "<connector>/<name>": an SVG icon a plugin ships, sanitised when the plugin loaded and
//   served as an image from /catalog/icons/<connector>/<name>.svg (an image runs no script).
// A node type missing from the catalog shows the initial of its label instead.

const SVG_NS = "http://www.w3.org/2000/svg";

/** The sprite holding every Lucide icon Railyard ships, one <symbol id="<name>"> each. */
export const SPRITE_URL = "/catalog/icons/lucide.svg";

/** The icon name to draw for a node type spec ("" when the type is not in the catalog). */
export function iconName(spec) {
  return spec?.icon || "";
}

/** The URL of a plugin icon "<connector>/<name>", or "" for a Lucide name. */
export function pluginIconUrl(name) {
  const [connector, icon, ...rest] = String(name || "").split("/");
  if (!connector || !icon || rest.length) return "";
  return `/catalog/icons/${encodeURIComponent(connector)}/${encodeURIComponent(icon)}.svg`;
}

/**
 * Append the icon to ``parent`` (an SVG element) as a <g> centred on (0, 0), ``size`` units
 * wide; when there is no icon, a text initial of ``label``.
 */
export function drawIcon(parent, name, label, size = 16) {
  const g = document.createElementNS(SVG_NS, "g");
  g.setAttribute("class", "icon-glyph");
  const box = { x: String(-size / 2), y: String(-size / 2), width: String(size), height: String(size) };
  const url = pluginIconUrl(name);
  if (url) {
    const image = document.createElementNS(SVG_NS, "image");
    for (const [k, v] of Object.entries(box)) image.setAttribute(k, v);
    image.setAttribute("href", url);
    image.setAttribute("class", "icon-image");
    g.appendChild(image);
  } else if (name) {
    const use = document.createElementNS(SVG_NS, "use");
    for (const [k, v] of Object.entries(box)) use.setAttribute(k, v);
    use.setAttribute("href", `${SPRITE_URL}#${name}`);
    use.dataset.icon = name;
    g.appendChild(use);
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
  svg.setAttribute("class", pluginIconUrl(name) ? "icon-svg has-image" : "icon-svg");
  drawIcon(svg, name, label, size);
  return svg;
}
