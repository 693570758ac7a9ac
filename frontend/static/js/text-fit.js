// Fitting text into fixed-width boxes by character count (SVG <text> does not wrap or
// ellipsize by itself). Widths are in characters of the node label font (13 px: about 7 px
// each); the full text goes into the element's tooltip.

/** ``text`` cut to ``max`` characters, the last one "…" when cut. */
export function truncate(text, max) {
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

/** Split text into at most maxLines lines of about width characters (the last gets "…"). */
export function wrap(text, width, maxLines) {
  const lines = [];
  for (const para of text.split("\n")) {
    let line = "";
    for (const word of para.split(/\s+/)) {
      if (!word) continue;
      if ((line + " " + word).trim().length > width && line) {
        lines.push(line);
        line = "";
      }
      line = (line ? line + " " : "") + (word.length > width ? truncate(word, width) : word);
    }
    lines.push(line);
  }
  if (lines.length > maxLines) {
    const kept = lines.slice(0, maxLines);
    kept[maxLines - 1] = truncate(kept[maxLines - 1] + " …", width);
    return kept;
  }
  return lines;
}

let measureContext = null;

/**
 * ``text`` cut with "…" so that it is at most ``maxPx`` pixels wide in ``font`` (a CSS font
 * shorthand without the family: "600 13px"; the page's family is used). Measured with a
 * 2D canvas context, which needs no page layout; falls back to about 7 px per character.
 */
export function fitText(text, maxPx, font) {
  if (!measureContext) {
    measureContext = document.createElement("canvas").getContext("2d") || { measureText: (s) => ({ width: s.length * 7 }) };
    measureContext.family = getComputedStyle(document.body).fontFamily || "sans-serif";
  }
  const ctx = measureContext;
  ctx.font = `${font} ${ctx.family}`;
  if (ctx.measureText(text).width <= maxPx) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, mid) + "…").width <= maxPx) lo = mid;
    else hi = mid - 1;
  }
  return text.slice(0, lo).trimEnd() + "…";
}
