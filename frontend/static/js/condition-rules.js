// Conditions as rows, and the JSONata they stand for (the no-code condition builder,
// condition-builder.js). Pure: no DOM.
//
// A condition is groups of rows: {groups: [[{field, op, value}, ...], ...]}; the rows of a
// group must all hold (and), the groups are alternatives (or). compile() writes the one
// JSONata text for it; parse() reads such a text back into rows when it is in the
// builder's subset (what compile() writes, spaces aside) and returns null otherwise, so a
// hand-written expression is never rewritten behind the user's back.

// Operators by the type of the field they apply to, as "id:label" (a trailing "*": unary,
// no value).
const BY_TYPE = {
  string: "eq:is equal to|ne:is not equal to|contains:contains|starts:starts with|ends:ends with|empty:is empty*|not_empty:is not empty*",
  number: "num_eq:=|num_ne:≠|gt:>|ge:≥|lt:<|le:≤",
  date: "after:is after|before:is before",
  boolean: "is_true:is true*|is_false:is false*",
  list: "has:contains|list_empty:is empty*|list_not_empty:is not empty*|longer:has more items than",
  any: "exists:exists*|missing:does not exist*",
};

/** [{id, type, label, unary}] in menu order. */
export const OPERATORS = Object.entries(BY_TYPE).flatMap(([type, list]) =>
  list.split("|").map((entry) => {
    const [id, label] = entry.split(/:(.*)/s);
    return { id, type, label: label.replace(/\*$/, ""), unary: label.endsWith("*") };
  }),
);

export const OPERATOR = new Map(OPERATORS.map((o) => [o.id, o]));

/** The operator type for a field-picker type ("integer" -> number, "array" -> list). */
export function typeOf(fieldType) {
  const t = String(fieldType || "").split(/[\s|,]/)[0];
  if (t === "number" || t === "integer") return "number";
  if (t === "boolean") return "boolean";
  if (t === "array") return "list";
  if (t === "string") return "string";
  return "any";
}

const FIELD = String.raw`\$?[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*`;
const STRING = String.raw`"(?:[^"\\]|\\.)*"`;
const NUMBER = String.raw`-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?`;

// [op, pattern (F: the field, V: the value), compile]
const FORMS = [
  ["starts", `\\$substring\\((F), 0, \\$length\\((S)\\)\\) = (S)`, (f, v) => `$substring(${f}, 0, $length(${v})) = ${v}`],
  ["ends", `\\$substring\\((F), -\\$length\\((S)\\)\\) = (S)`, (f, v) => `$substring(${f}, -$length(${v})) = ${v}`],
  ["contains", `\\$contains\\((F), (S)\\)`, (f, v) => `$contains(${f}, ${v})`],
  ["empty", `\\(\\$not\\(\\$exists\\((F)\\)\\) or (F) = ""\\)`, (f) => `($not($exists(${f})) or ${f} = "")`],
  ["not_empty", `\\(\\$exists\\((F)\\) and (F) != ""\\)`, (f) => `($exists(${f}) and ${f} != "")`],
  ["after", `\\$toMillis\\((F)\\) > \\$toMillis\\((S)\\)`, (f, v) => `$toMillis(${f}) > $toMillis(${v})`],
  ["before", `\\$toMillis\\((F)\\) < \\$toMillis\\((S)\\)`, (f, v) => `$toMillis(${f}) < $toMillis(${v})`],
  ["list_empty", `\\$count\\((F)\\) = 0`, (f) => `$count(${f}) = 0`],
  ["list_not_empty", `\\$count\\((F)\\) > 0`, (f) => `$count(${f}) > 0`],
  ["longer", `\\$count\\((F)\\) > (N)`, (f, v) => `$count(${f}) > ${v}`],
  ["has", `(S|N) in (F)`, (f, v) => `${v} in ${f}`],
  ["missing", `\\$not\\(\\$exists\\((F)\\)\\)`, (f) => `$not($exists(${f}))`],
  ["exists", `\\$exists\\((F)\\)`, (f) => `$exists(${f})`],
  ["is_true", `(F) = true`, (f) => `${f} = true`],
  ["is_false", `(F) = false`, (f) => `${f} = false`],
  ["eq", `(F) = (S)`, (f, v) => `${f} = ${v}`],
  ["ne", `(F) != (S)`, (f, v) => `${f} != ${v}`],
  ["num_eq", `(F) = (N)`, (f, v) => `${f} = ${v}`],
  ["num_ne", `(F) != (N)`, (f, v) => `${f} != ${v}`],
  ["ge", `(F) >= (N)`, (f, v) => `${f} >= ${v}`],
  ["le", `(F) <= (N)`, (f, v) => `${f} <= ${v}`],
  ["gt", `(F) > (N)`, (f, v) => `${f} > ${v}`],
  ["lt", `(F) < (N)`, (f, v) => `${f} < ${v}`],
].map(([op, pattern, write]) => ({
  op,
  re: new RegExp(`^${pattern.replaceAll("F", FIELD).replaceAll("(S|N)", `(${STRING}|${NUMBER})`).replaceAll("S", STRING).replaceAll("N", NUMBER)}$`),
  write,
}));
const WRITE = new Map(FORMS.map((f) => [f.op, f.write]));

/** The JSONata literal of a row's value for its operator's type. */
function literal(op, value) {
  const type = OPERATOR.get(op)?.type;
  const text = String(value ?? "");
  if (type === "number" || op === "longer") return Number.isFinite(Number(text)) && text.trim() !== "" ? String(Number(text)) : "0";
  if (op === "has" && text.trim() !== "" && Number.isFinite(Number(text))) return String(Number(text));
  return JSON.stringify(text);
}

/** The JSONata of one row ("" for a row without a field). */
export function compileRow({ field, op, value }) {
  if (!field || !new RegExp(`^${FIELD}$`).test(field) || !WRITE.has(op)) return "";
  return WRITE.get(op)(field, literal(op, value));
}

/** The JSONata of a whole condition ("" when no row has a field). */
export function compile({ groups }) {
  const parts = groups
    .map((rows) => rows.map(compileRow).filter(Boolean))
    .filter((terms) => terms.length);
  if (!parts.length) return "";
  const joined = parts.map((terms) => terms.join(" and "));
  if (parts.length === 1) return joined[0];
  return joined.map((text, i) => (parts[i].length > 1 ? `(${text})` : text)).join(" or ");
}

/** [index, character, bracket depth after it] of each character outside string literals. */
function* unquoted(text) {
  let depth = 0;
  let quote = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === "\\") i++;
      else if (c === '"') quote = false;
      continue;
    }
    if (c === '"') quote = true;
    else if (c === "(" || c === "[") depth++;
    else if (c === ")" || c === "]") depth--;
    yield [i, c, depth];
  }
}

/** Split ``text`` at `` word `` outside brackets and string literals. */
function splitTop(text, word) {
  const cuts = [];
  for (const [i, , depth] of unquoted(text)) {
    const last = cuts.at(-1);
    if (depth === 0 && (!last || i >= last + word.length + 2) && text.startsWith(` ${word} `, i)) cuts.push(i);
  }
  const parts = [];
  let start = 0;
  for (const i of cuts) {
    parts.push(text.slice(start, i));
    start = i + word.length + 2;
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim());
}

/** Whether ``text`` is one pair of brackets around everything. */
function wrapped(text) {
  if (!text.startsWith("(") || !text.endsWith(")")) return false;
  for (const [i, c, depth] of unquoted(text)) {
    if (c === ")" && depth === 0 && i < text.length - 1) return false;
  }
  return true;
}

function parseRow(term) {
  const text = term.trim();
  for (const form of FORMS) {
    const m = form.re.exec(text);
    if (!m) continue;
    const captures = m.slice(1);
    const field = captures.find((c) => c !== undefined && new RegExp(`^${FIELD}$`).test(c) && !/^-?\d/.test(c));
    const valueText = form.op === "has" ? captures[0] : captures.find((c) => c !== field && c !== undefined);
    let value = "";
    if (valueText !== undefined && !OPERATOR.get(form.op).unary) {
      value = valueText.startsWith('"') ? JSON.parse(valueText) : valueText;
    }
    return { field, op: form.op, value: String(value) };
  }
  return null;
}

/**
 * Rows of a JSONata text written by compile() (or "" for an empty condition), or null when
 * the text is outside the builder's subset. A leading "=" is ignored.
 */
export function parse(source) {
  const text = String(source || "").replace(/^=/, "").trim();
  if (!text) return { groups: [[{ field: "", op: "eq", value: "" }]] };
  const groups = [];
  for (let part of splitTop(text, "or")) {
    // "(a and b)" is a group; "($exists(x) and x != "")" one row (is not empty)
    if (wrapped(part) && !parseRow(part)) part = part.slice(1, -1);
    const rows = [];
    for (const term of splitTop(part, "and")) {
      const row = parseRow(term);
      if (!row) return null;
      rows.push(row);
    }
    groups.push(rows);
  }
  // only what compile() writes back unchanged is the builder's
  return compile({ groups }) === text ? { groups } : null;
}
