// JSON bodies as text, for the expression editor on a JSON field (HTTP Request's and
// Respond's bodies, For each's items): where the string literal under the cursor is (an
// "=..." string inside a JSON value is an expression, designer_schema/config_expressions.py),
// where a parse error is (line and column), and the text formatted. Pure: no DOM.

/**
 * The string literal of ``text`` that holds offset ``at`` (after its opening quote, up to
 * its closing one), or null: {start, end, value} with ``start`` the offset of the opening
 * quote, ``end`` that of the closing quote (text.length when unclosed) and ``value`` the
 * decoded text so far ("" when it cannot be decoded).
 */
export function stringAt(text, at) {
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (start < 0) {
      if (c === '"') start = i;
      if (i >= at) return null;
      continue;
    }
    if (c === "\\") {
      i++;
      continue;
    }
    if (c === '"') {
      if (at > start && at <= i) return literal(text, start, i);
      start = -1;
    }
  }
  return start >= 0 && at > start ? literal(text, start, text.length) : null;
}

function literal(text, start, end) {
  let value = "";
  try {
    value = JSON.parse(`${text.slice(start, end)}"`);
  } catch {
    value = "";
  }
  return { start, end, value };
}

/** null when ``text`` is empty or valid JSON, else {message, line, column} (1-based). */
export function jsonError(text) {
  if (!text.trim()) return null;
  try {
    JSON.parse(text);
    return null;
  } catch (err) {
    const message = String(err.message || err);
    const m = /position (\d+)/.exec(message);
    const lineCol = /line (\d+) column (\d+)/.exec(message);
    if (lineCol) return { message, line: Number(lineCol[1]), column: Number(lineCol[2]) };
    const at = m ? Number(m[1]) : text.length;
    const before = text.slice(0, at).split("\n");
    return { message, line: before.length, column: before.at(-1).length + 1 };
  }
}

/** The expressions ("=..." strings, "==" escapes left out) anywhere in a JSON value. */
export function expressionsIn(value, out = []) {
  if (typeof value === "string") {
    if (value.startsWith("=") && !value.startsWith("==")) out.push(value);
  } else if (Array.isArray(value)) {
    for (const v of value) expressionsIn(v, out);
  } else if (value && typeof value === "object") {
    for (const v of Object.values(value)) expressionsIn(v, out);
  }
  return out;
}

/** ``text`` formatted with two spaces, or null when it is not valid JSON. */
export function formatJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return null;
  }
}
