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

/**
 * ``text`` with ``path`` put at ``start``..``end``: into the "=..." string there (joined
 * with " & " unless ``asIs`` or right after an operator), as text into a plain string (a
 * key, a fixed text), else as a new "=path" string. -> {text, cursor} (a new string's
 * cursor inside its quotes).
 */
export function pathInJson(text, start, end, path, asIs = false) {
  const string = stringAt(text, start);
  let insert;
  if (string && text[string.start + 1] === "=") {
    const before = text.slice(string.start + 1, start);
    insert = (asIs || before === "=" || /[\s(&+\-*/,[{:=]$/.test(before) ? "" : " & ") + path;
  } else {
    insert = string ? path : JSON.stringify(`=${path}`);
  }
  return { text: text.slice(0, start) + insert + text.slice(end), cursor: start + insert.length - (string ? 0 : 1) };
}

/**
 * ``text`` (JSON) with a field mapped in: into the "=..." string at offset ``at``; else, for
 * an object, a new member named after the path's last part ("email": "=body.customer.email",
 * a taken name gets _2, _3 ...), for a list a new last item (indented with two spaces);
 * else (not valid JSON) as :func:`pathInJson` puts it at ``at``.
 */
export function mapIntoJson(text, at, path) {
  const string = stringAt(text, at);
  let value;
  try {
    value = string && text[string.start + 1] === "=" ? undefined : JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (Array.isArray(value)) return JSON.stringify([...value, `=${path}`], null, 2);
  if (value && typeof value === "object") {
    const base = path.split(".").pop().replace(/`/g, "") || "field";
    let name = base;
    for (let n = 2; name in value; n++) name = `${base}_${n}`;
    return JSON.stringify({ ...value, [name]: `=${path}` }, null, 2);
  }
  return pathInJson(text, at, at, path).text;
}

/**
 * null when ``text`` is empty or valid JSON, else {message, line, column} (1-based), the
 * message without the position it gives (said once, by line and column).
 */
export function jsonError(text) {
  if (!text.trim()) return null;
  try {
    JSON.parse(text);
    return null;
  } catch (err) {
    const raw = String(err.message || err);
    const m = /position (\d+)/.exec(raw);
    const lineCol = /line (\d+) column (\d+)/.exec(raw);
    // the where is given once, as line and column: the engine's own "at position 174
    // (line 3 column 3)" (V8) or "at line 3 column 3" (SpiderMonkey) is left out
    const message = raw.replace(/\s*(?:in JSON\s*)?(?:at position \d+\s*)?(?:\(?\s*(?:at )?line \d+ column \d+[^)]*\)?)?(?: of the JSON data)?$/, "") || raw;
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
